// Counts the allocation calls of each thread, for the tests that check a path allocates nothing.
//
// The test executable defines the C allocation functions itself, so the dynamic linker binds every
// call of the process to these (libc's, the Swift runtime's and libevent's included); each adds
// one to a counter of the calling thread and forwards to glibc's own allocator (`__libc_*`), so
// memory is still freed by glibc's `free`. A counter per thread, so that tests running in
// parallel on other threads do not disturb a count.
//
// Not in sanitizer builds: their runtime replaces the allocator, and memory it did not hand out
// must not reach its `free`.

#include "allocation_counter.h"

#include <errno.h>
#include <stddef.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define RLK_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RLK_SANITIZED 1
#endif

// initial-exec: the counter is in the static TLS block, reached without a call that could allocate.
static __thread unsigned long long calls __attribute__((tls_model("initial-exec")));

unsigned long long rlk_thread_allocations(void) { return calls; }

#ifdef RLK_SANITIZED

int rlk_allocation_counting(void) { return 0; }

#else

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);

int rlk_allocation_counting(void) { return 1; }

void *malloc(size_t size) {
    calls++;
    return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
    calls++;
    return __libc_calloc(count, size);
}

void *realloc(void *pointer, size_t size) {
    calls++;
    return __libc_realloc(pointer, size);
}

void *memalign(size_t alignment, size_t size) {
    calls++;
    return __libc_memalign(alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size) {
    calls++;
    return __libc_memalign(alignment, size);
}

int posix_memalign(void **result, size_t alignment, size_t size) {
    // POSIX: a power of two, and a multiple of the size of a pointer.
    if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment % sizeof(void *) != 0) return EINVAL;
    calls++;
    void *memory = __libc_memalign(alignment, size);
    if (memory == NULL) return ENOMEM;
    *result = memory;
    return 0;
}

#endif
