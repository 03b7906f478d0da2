// GLib's main loop driving another loop through a descriptor and a timeout, as a GTK program
// would drive a RunLoopKit loop (Loop.backendDescriptor, Loop.nextTimerFireDate(forMode:)): for
// the embedding tests. GLib's own headers stay out of this one, so Swift sees plain C types.
#ifndef GLIB_DRIVER_H
#define GLIB_DRIVER_H

/// Milliseconds until the driven loop next has something due (0: now), -1 if nothing.
typedef int (*glib_driver_timeout_fn)(void *context);
/// Runs the driven loop without sleeping; returns 0 to end GLib's loop.
typedef int (*glib_driver_run_fn)(void *context);

/// What one call of `glib_driver_run` saw.
typedef struct {
    /// Times GLib dispatched the source (the driven loop was run).
    int dispatches;
    /// Of those, times the descriptor was readable.
    int readable;
    /// Times a GLib timeout of its own (every 10 ms) ran meanwhile: GLib kept serving its own.
    int glib_ticks;
    /// 1 if `limit_ms` passed before `run` returned 0.
    int timed_out;
} glib_driver_report;

/// Runs a GLib main loop in a new context on the calling thread, with a source that polls `fd`
/// for reading and takes its timeout from `timeout`, calling `run` when either comes, until
/// `run` returns 0 or `limit_ms` passes.
glib_driver_report glib_driver_run(int fd, glib_driver_timeout_fn timeout, glib_driver_run_fn run, void *context,
                                   int limit_ms);

#endif
