#include "outer_loops.h"

#include <errno.h>
#include <sys/epoll.h>
#include <unistd.h>

int outer_epoll_watching(int fd) {
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) return -errno;
    struct epoll_event interest = {.events = EPOLLIN, .data = {.fd = fd}};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &interest) != 0) {
        int code = errno;
        close(epfd);
        return -code;
    }
    return epfd;
}

int outer_epoll_wait(int epfd, int timeout_ms) {
    struct epoll_event ready;
    int count;
    do {
        count = epoll_wait(epfd, &ready, 1, timeout_ms);
    } while (count < 0 && errno == EINTR);
    return count < 0 ? -errno : count;
}
