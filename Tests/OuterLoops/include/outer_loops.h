// Loops the library did not write, for the tests of a RunLoopKit loop driven by another loop: a
// plain epoll instance (Swift's Glibc module does not import <sys/epoll.h>).
#ifndef OUTER_LOOPS_H
#define OUTER_LOOPS_H

/// A new epoll instance (close-on-exec) watching `fd` for reading; -errno on failure.
int outer_epoll_watching(int fd);

/// `epoll_wait` for one event on `epfd`, at most `timeout_ms` (-1: no limit); returns the number
/// of ready descriptors (0 or 1), -errno on failure.
int outer_epoll_wait(int epfd, int timeout_ms);

#endif
