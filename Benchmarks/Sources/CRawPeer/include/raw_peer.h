#ifndef RAW_PEER_H
#define RAW_PEER_H

// What the benchmark's C peers (raw libevent, libuv, GLib) share: their results, the function
// table through which the Swift side runs each of them, the workloads that only need a loop
// taking work from other threads (posts, ping-pong, loops asleep), and the clocks, latches and
// processor pinning every workload uses. Every function is bounded by a timeout and reports
// `ok == 0` instead of hanging.

#include <pthread.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// MARK: Results

typedef struct {
    int ok;
    double seconds;   ///< from releasing the producers to the last item run
    long long count;  ///< items run
} raw_post_result;

typedef struct {
    int ok;
    int completed;
} raw_pingpong_result;

typedef struct {
    int ok;
    int fired;
    double schedule_seconds;     ///< creating and adding all timers
    double schedule_end_offset;  ///< end of scheduling minus the first possible due time (< 0: in time)
} raw_timers_result;

typedef struct {
    int ok;
    double seconds;
} raw_churn_result;

typedef struct {
    int ok;
    double seconds;
    long long iterations;
    long long observer_calls;
} raw_iteration_result;

typedef struct {
    int ok;
    double seconds;
    int round_trips;
} raw_fd_result;

// MARK: Loops that take work from other threads

/// An item's function; runs on the loop's thread. Its result is ignored except by GLib, whose
/// `GSourceFunc` it is (0: `G_SOURCE_REMOVE`).
typedef int (*raw_fn)(void *context);

/// The typical post's payload: what a block capturing two objects and three integers carries.
/// The loop thread does a little work with it (`raw_typical_run`) and frees the peer's item.
typedef struct raw_tally {
    /// A reference count in the object's first cache line, as a Swift object's header has one:
    /// changed only by counted posts (`raw_peer_post_throughput`'s `typical` 2).
    long long refs;
    long long sum;
    long long count;
} raw_tally;

typedef struct {
    void *counter;     ///< the run's counter
    raw_tally *tally;  ///< the producer's tally
    long long index, weight, producer;
    /// Counted post: the producer added a reference to both objects (`raw_peer_retain`) and
    /// the work drops them after it ran (`raw_peer_release`).
    long long counted;
} raw_typical;

/// Adds one to `*refs` the way the Swift runtime retains an object: a compare-and-swap loop on
/// the count word (`swift_retain`), not a locked add, so that a contended word costs what it
/// costs the runtime.
void raw_peer_retain(long long *refs);
/// Takes one from `*refs` the way the Swift runtime releases an object (a release-ordered
/// compare-and-swap loop).
void raw_peer_release(long long *refs);

/// The work of a typical post, on the loop thread: adds to the tally, then counts the item.
void raw_typical_run(const raw_typical *values);

/// What a descriptor watcher calls, on the loop's thread.
typedef void (*raw_readable_fn)(void *context, int fd);

/// A loop on its own thread, fed through a peer's own cross-thread mechanism.
typedef struct {
    /// Starts a loop thread and waits until it runs; NULL on failure.
    void *(*start)(void);
    /// Queues `fn(context)` on the loop's thread; any thread.
    void (*post)(void *loop, raw_fn fn, void *context);
    /// Queues a copy of `values` in an item of the peer's own allocation; the loop thread runs
    /// `raw_typical_run` on it and frees it.
    void (*post_typical)(void *loop, const raw_typical *values);
    /// Stops the loop after the items already queued, joins and frees it; 0 if it did not exit
    /// in time (it is then leaked rather than freed under a running thread).
    int (*stop)(void *loop);
} raw_loop_ops;

struct raw_socket_ops;

/// A peer: its loop, and the workloads it does in its own idiom.
typedef struct {
    raw_loop_ops loop;
    const char *(*version)(void);
    /// `count` one-shot timers due at `now + lead_seconds + offsets[i]`, scheduled on the calling
    /// thread, then dispatched there. Lateness in microseconds to `lateness_us[i]`.
    raw_timers_result (*timers)(int count, const double *offsets, double lead_seconds, double *lateness_us,
                                double timeout_seconds);
    /// Schedules `timers` timers an hour away, invalidating each one `window` timers later.
    raw_churn_result (*timer_churn)(long long timers, int window);
    /// Adds `count` items to one loop of the calling thread, then removes them all in the order
    /// `removal_order` (a permutation of 0 ..< count): timers an hour away, or with `sources`, the
    /// library's custom event sources, never signalled (`ok` is 0 for a peer without them). The
    /// seconds from the first add to the last removal; the items' memory is allocated before and
    /// freed after.
    raw_churn_result (*items_at_scale)(int count, const int32_t *removal_order, int sources);
    /// Schedules `blocks` one-shot timers on a loop of the calling thread and cancels each at once
    /// (an hour away); with `fire_half`, all due now, every other one cancelled at once, then the
    /// loop runs until the others have fired. Each fired timer is freed as it runs.
    raw_churn_result (*schedule_cancel)(long long blocks, int fire_half);
    /// A loop kept busy by a source that is always ready, with `observers` callouts before and
    /// after polling on each pass; runs for `seconds`.
    raw_iteration_result (*iteration)(double seconds, int observers);
    /// On the loop's thread: watches `fd` for reading, calling `readable(context, fd)` whenever it
    /// is readable; the watcher.
    void *(*watch_fd)(void *loop, int fd, raw_readable_fn readable, void *context);
    /// On the loop's thread: stops and frees a watcher.
    void (*unwatch_fd)(void *watcher);
    /// On the loop's thread: a timer that does nothing every second, first 0.5 s from now.
    void *(*tick_start)(void *loop);
    /// On the loop's thread: stops and frees the timer.
    void (*tick_stop)(void *tick);
    /// How many times the loop has returned from waiting so far (any thread).
    long long (*loop_passes)(void *loop);
    /// `count` timers an hour away on one loop of the calling thread: the set, no timer yet.
    void *(*timer_set_new)(int count);
    void (*timer_set_fill)(void *set);
    void (*timer_set_free)(void *set);
    /// The server I/O workloads (include/raw_peer_sockets.h); NULL for a peer without them.
    const struct raw_socket_ops *sockets;
} raw_peer;

/// A timers run's result: `fired` of `count` timers, scheduled from `start` to `end`, the first
/// due at `first`.
raw_timers_result raw_timers_outcome(int fired, int count, double start, double end, double first);

/// Post throughput: `producers` threads post `blocks` items in total to one loop, each a plain
/// (function, context) pair, or with `typical` 1, a typical payload; `typical` 2: the typical
/// payload with a reference count on each of its two objects, added on the producer and dropped
/// after the work on the loop thread, as a Swift closure capturing them retains and releases
/// them (`runloop-bench --post-floor`). `loop_cpu` and `producer_cpu`:
/// the processors to pin the loop thread and the producers to, or -1 to leave them to the
/// scheduler (`ok` is 0 if pinning fails).
raw_post_result raw_peer_post_throughput(const raw_peer *peer, int producers, long long blocks, int typical,
                                         double timeout_seconds, int loop_cpu, int producer_cpu);
/// `round_trips` sequential round trips A -> B -> A between two loops; the round-trip times in
/// microseconds go to `rtt_us` (room for `round_trips` values).
raw_pingpong_result raw_peer_pingpong(const raw_peer *peer, int round_trips, double *rtt_us,
                                      double timeout_seconds);
/// One byte bounced `round_trips` times over a socketpair between two loops, each end watched
/// with `watch_fd`.
raw_fd_result raw_peer_fd_pingpong(const raw_peer *peer, int round_trips, double timeout_seconds);
/// An idle loop, optionally with a 1 Hz timer (`tick_start`); opaque handle or NULL.
void *raw_peer_idle_start(const raw_peer *peer, int with_timer);
/// How many times the idle loop has returned from waiting so far (any thread).
long long raw_peer_idle_wakeups(void *idle);
/// Stops and frees the idle loop; 1 if its thread exited in time.
int raw_peer_idle_stop(void *idle);
/// `count` loops, each a thread asleep in its loop. NULL on failure.
void *raw_peer_loops_start(const raw_peer *peer, int count);
void raw_peer_loops_stop(void *loops);

// MARK: Clocks, latches, memory

/// CLOCK_MONOTONIC in seconds.
double raw_mono_now(void);

/// A one-shot flag with a timed wait (CLOCK_MONOTONIC).
typedef struct {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    int open;
} raw_latch;
void raw_latch_init(raw_latch *latch);
void raw_latch_destroy(raw_latch *latch);
void raw_latch_open(raw_latch *latch);
/// 1 once open, 0 if `timeout` seconds passed first.
int raw_latch_wait(raw_latch *latch, double timeout);

/// How a loop thread's start went (`raw_loop_thread_start`).
typedef enum {
    raw_start_ok = 0,
    /// pthread_create failed: the caller frees the loop.
    raw_start_not_created,
    /// The thread did not report ready in 10 s: it is detached and the loop leaked (never touched).
    raw_start_timed_out,
    /// The thread reported a failure and has exited (joined): the caller frees the loop.
    raw_start_failed,
} raw_start_result;

/// Starts `main(arg)` on `*thread` and waits for it to open `ready`, then reads `*failed`.
raw_start_result raw_loop_thread_start(pthread_t *thread, void *(*main)(void *), void *arg, raw_latch *ready,
                                       const int *failed);

/// Resident set size of the process (`/proc/self/statm`), in bytes.
long long raw_rss_bytes(void);
/// `malloc_trim(0)`: returns free heap pages to the kernel so that an RSS baseline is clean.
void raw_malloc_trim(void);

// MARK: Processors

/// Nanoseconds for one cache line to go from one processor to another and back: two threads,
/// pinned to the first two processors this process may use, take turns writing one atomic word
/// (`rounds` round trips, the average). Every block that captures an object shared with the
/// posting thread costs at least this much (its reference count changes on both sides). 0 with
/// fewer than two processors or if the threads could not be pinned.
double raw_core_round_trip_ns(int rounds);
/// How many processors this process may run on (`sched_getaffinity`); 0 if unknown.
int raw_allowed_processors(void);
/// Pins the calling thread to processor `cpu` (`pthread_setaffinity_np`); 1 on success.
int raw_pin_thread(int cpu);
/// The `index`-th processor (from 0) this process may run on, or -1.
int raw_allowed_processor(int index);

#ifdef __cplusplus
}
#endif

#endif
