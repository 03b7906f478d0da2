#ifndef RAW_LIBEVENT_H
#define RAW_LIBEVENT_H
/// Workloads done directly on libevent: the floor the benchmark compares against.
int raw_libevent_version_ok(void);
#endif
