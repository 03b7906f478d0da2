// See include/rlk_platform.h. _GNU_SOURCE here only: the header that Swift imports must not
// define it (Glibc's types would then differ from those of Swift's Glibc module).
#define _GNU_SOURCE
#include "rlk_platform.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#include <sanitizer/asan_interface.h>
#define RLK_ADDRESS_SANITIZER 1
#endif
#endif

void rlk_poison_memory(void *address, size_t bytes) {
#ifdef RLK_ADDRESS_SANITIZER
    __asan_poison_memory_region(address, bytes);
#else
    (void)address;
    (void)bytes;
#endif
}

void rlk_unpoison_memory(void *address, size_t bytes) {
#ifdef RLK_ADDRESS_SANITIZER
    __asan_unpoison_memory_region(address, bytes);
#else
    (void)address;
    (void)bytes;
#endif
}

int rlk_memory_is_poisoned(void *address) {
#ifdef RLK_ADDRESS_SANITIZER
    return __asan_address_is_poisoned(address);
#else
    (void)address;
    return 0;
#endif
}

int rlk_address_sanitizer_enabled(void) {
#ifdef RLK_ADDRESS_SANITIZER
    return 1;
#else
    return 0;
#endif
}

__thread void *rlk_current_loop __attribute__((tls_model("initial-exec"))) = NULL;

int rlk_gettid(void) {
    return (int)syscall(SYS_gettid);
}

void rlk_set_thread_name(const char *name) {
    prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
}

int rlk_descriptor_type(int fd) {
    struct stat info;
    if (fstat(fd, &info) != 0) return -errno;
    return (int)(info.st_mode & S_IFMT);
}

int rlk_epoll_probe(int fd) {
    int probe = epoll_create1(EPOLL_CLOEXEC);
    if (probe < 0) return 1;
    struct epoll_event event = {.events = EPOLLIN, .data = {.fd = fd}};
    int result = epoll_ctl(probe, EPOLL_CTL_ADD, fd, &event) == 0 ? 0 : -errno;
    close(probe);  // the registration goes with it
    return result;
}

// Whether the epoll descriptor `epfd` lists `fd` among its registrations: its fdinfo has a line
// "tfd: <fd> events: ..." per registered descriptor.
static int rlk_epoll_lists(int epfd, int fd) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", epfd);
    FILE *info = fopen(path, "re");
    if (!info) return 0;
    char line[256];
    int found = 0;
    while (!found && fgets(line, sizeof line, info)) {
        int registered;
        if (sscanf(line, "tfd: %d", &registered) == 1 && registered == fd) found = 1;
    }
    fclose(info);
    return found;
}

int rlk_epoll_watching(int fd) {
    DIR *directory = opendir("/proc/self/fd");
    if (!directory) return -errno;
    int own = dirfd(directory);
    int result = -1;
    struct dirent *entry;
    while (result < 0 && (entry = readdir(directory)) != NULL) {
        char *end;
        long candidate = strtol(entry->d_name, &end, 10);
        if (*end != '\0' || end == entry->d_name || candidate == own) continue;
        char link[64], target[64];
        snprintf(link, sizeof link, "/proc/self/fd/%ld", candidate);
        ssize_t length = readlink(link, target, sizeof target - 1);
        if (length <= 0) continue;
        target[length] = '\0';
        if (strcmp(target, "anon_inode:[eventpoll]") == 0 && rlk_epoll_lists((int)candidate, fd)) {
            result = (int)candidate;
        }
    }
    closedir(directory);
    return result;
}

int rlk_accept(int fd, struct sockaddr *addr, socklen_t *addrlen) {
    return accept4(fd, addr, addrlen, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

// MARK: Signals

#define RLK_SIGNAL_LIMIT 65

// Slots hold fd + 1, so that the zero-initialised table means "empty".
static _Atomic int signal_slots[RLK_SIGNAL_LIMIT][RLK_SIGNAL_SLOTS];
static _Atomic int handlers_running;
static struct sigaction previous_actions[RLK_SIGNAL_LIMIT];

static void signal_handler(int signo) {
    int saved = errno;
    atomic_fetch_add(&handlers_running, 1);
    if (signo > 0 && signo < RLK_SIGNAL_LIMIT) {
        for (int i = 0; i < RLK_SIGNAL_SLOTS; i++) {
            int slot = atomic_load(&signal_slots[signo][i]);
            if (slot > 0) {
                uint64_t one = 1;
                ssize_t ignored = write(slot - 1, &one, sizeof one);
                (void)ignored;
            }
        }
    }
    atomic_fetch_sub(&handlers_running, 1);
    errno = saved;
}

int rlk_signal_attach(int signo, int fd) {
    int used = 0, free_slot = -1;
    for (int i = 0; i < RLK_SIGNAL_SLOTS; i++) {
        if (atomic_load(&signal_slots[signo][i]) > 0) used++;
        else if (free_slot < 0) free_slot = i;
    }
    if (free_slot < 0) return -1;
    atomic_store(&signal_slots[signo][free_slot], fd + 1);
    if (used == 0) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_handler = signal_handler;
        action.sa_flags = SA_RESTART;
        sigemptyset(&action.sa_mask);
        if (sigaction(signo, &action, &previous_actions[signo]) != 0) {
            atomic_store(&signal_slots[signo][free_slot], 0);
            return -2;
        }
    }
    return free_slot;
}

void rlk_signal_detach(int signo, int slot) {
    atomic_store(&signal_slots[signo][slot], 0);
    int used = 0;
    for (int i = 0; i < RLK_SIGNAL_SLOTS; i++) {
        if (atomic_load(&signal_slots[signo][i]) > 0) used++;
    }
    if (used == 0) sigaction(signo, &previous_actions[signo], NULL);
    while (atomic_load(&handlers_running) > 0) sched_yield();
}

void rlk_signal_unblock(int signo) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, signo);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

// MARK: Child processes

int rlk_pidfd_open(pid_t pid) {
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

int rlk_pidfd_send_signal(int pidfd, int signo) {
    return (int)syscall(SYS_pidfd_send_signal, pidfd, signo, NULL, 0);
}

int rlk_spawn_add_close_from(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}

int rlk_spawn_add_chdir(posix_spawn_file_actions_t *actions, const char *path) {
    return posix_spawn_file_actions_addchdir_np(actions, path);
}

// MARK: The main dispatch queue

extern int _dispatch_get_main_queue_handle_4CF(void);
extern void _dispatch_main_queue_callback_4CF(void *msg);

int rlk_main_queue_handle(void) {
    return _dispatch_get_main_queue_handle_4CF();
}

void rlk_main_queue_drain(void) {
    _dispatch_main_queue_callback_4CF(NULL);
}
