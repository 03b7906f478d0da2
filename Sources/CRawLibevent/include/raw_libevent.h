#ifndef RAW_LIBEVENT_H
#define RAW_LIBEVENT_H

// The benchmark's workloads done directly on libevent 2.1 in C: the practical floor that
// RunLoopKit is compared against. Every function is bounded by a timeout and reports `ok == 0`
// instead of hanging.
//
// Loops that receive work from other threads ("raw loops") are one pthread each with its own
// event_base (EVENT_BASE_FLAG_NOLOCK: only the loop's thread touches it), a mutex-protected queue
// of (function, context) items and an eventfd written once per batch (coalesced wake-up).
// Timer workloads use EVENT_BASE_FLAG_NOLOCK | EVENT_BASE_FLAG_PRECISE_TIMER (CLOCK_MONOTONIC and a
// timerfd instead of the 4 ms CLOCK_MONOTONIC_COARSE).

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Whether the libevent linked is 2.1 or newer.
int raw_libevent_version_ok(void);
/// `event_get_version()`.
const char *raw_libevent_version(void);

/// Resident set size of the process (`/proc/self/statm`), in bytes.
long long raw_rss_bytes(void);
/// `malloc_trim(0)`: returns free heap pages to the kernel so that an RSS baseline is clean.
void raw_malloc_trim(void);

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

/// Workload 1: `producers` threads post `blocks` items in total to one raw loop. `loop_cpu` and
/// `producer_cpu`: the processors to pin the loop thread and the producers to, or -1 to leave
/// them to the scheduler (`ok` is 0 if pinning fails).
typedef struct {
    int ok;
    double seconds;   ///< from releasing the producers to the last item run
    long long count;  ///< items run
} raw_post_result;
raw_post_result raw_post_throughput(
    int producers, long long blocks, double timeout_seconds, int loop_cpu, int producer_cpu);

/// Workload 2: `round_trips` sequential round trips A -> B -> A between two raw loops; the round
/// trip times in microseconds go to `rtt_us` (room for `round_trips` values).
typedef struct {
    int ok;
    int completed;
} raw_pingpong_result;
raw_pingpong_result raw_pingpong(int round_trips, double *rtt_us, double timeout_seconds);

/// Workload 3: `count` one-shot evtimers due at `now + lead_seconds + offsets[i]`, scheduled on the
/// calling thread (event_new + event_add), then dispatched. Lateness in microseconds to
/// `lateness_us[i]`.
typedef struct {
    int ok;
    int fired;
    double schedule_seconds;     ///< event_new + event_add of all timers
    double schedule_end_offset;  ///< end of scheduling minus the first possible due time (< 0: in time)
} raw_timers_result;
raw_timers_result raw_timers(int count, const double *offsets, double lead_seconds, double *lateness_us,
                             double timeout_seconds);

/// Workload 4: schedule `timers` evtimers and invalidate (event_free) each one `window` timers later.
typedef struct {
    int ok;
    double seconds;
} raw_churn_result;
raw_churn_result raw_timer_churn(long long timers, int window);

/// Workload 5: a loop kept busy by an event that re-activates itself; each pass calls `observers`
/// functions at "before timers" and "before sources" (libevent 2.1 has no observers: this is the
/// floor of calling them), then `event_base_loop(EVLOOP_NONBLOCK)`.
typedef struct {
    int ok;
    double seconds;
    long long iterations;
    long long observer_calls;
} raw_iteration_result;
raw_iteration_result raw_iteration(double seconds, int observers);

/// Workload 6: one byte bounced `round_trips` times over a socketpair between two raw loops.
typedef struct {
    int ok;
    double seconds;
    int round_trips;
} raw_fd_result;
raw_fd_result raw_fd_pingpong(int round_trips, double timeout_seconds);

/// Workload 7: an idle raw loop (only its wake-up eventfd registered), optionally with a 1 Hz
/// timer whose first fire is 0.5 s after setup. The caller counts `event_base_loop(EVLOOP_ONCE)`
/// returns over its measuring window.
/// Starts an idle loop; returns an opaque handle or NULL.
void *raw_idle_start(int with_timer);
/// Number of `event_base_loop` returns so far (any thread).
long long raw_idle_wakeups(void *idle);
/// Stops and frees the idle loop. Returns 1 if the loop thread exited in time.
int raw_idle_stop(void *idle);

/// Workload 8: memory. A set of `count` pending evtimers on one base (created on the calling thread).
void *raw_timer_set_new(int count);  ///< the base and the handle array, no timer yet
void raw_timer_set_fill(void *set);   ///< event_new + event_add, an hour away
void raw_timer_set_free(void *set);
/// `count` raw loops, each a thread asleep in its event_base. NULL on failure.
void *raw_loops_start(int count);
void raw_loops_stop(void *loops);

#ifdef __cplusplus
}
#endif

#endif
