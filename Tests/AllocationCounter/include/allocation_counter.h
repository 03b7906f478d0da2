#ifndef ALLOCATION_COUNTER_H
#define ALLOCATION_COUNTER_H

/// Whether this process's allocation calls are counted: 0 in a sanitizer build, whose runtime
/// provides the allocator itself.
int rlk_allocation_counting(void);

/// How many times the calling thread has called malloc, calloc, realloc, aligned_alloc,
/// posix_memalign or memalign so far.
unsigned long long rlk_thread_allocations(void);

#endif
