#include "glib_driver.h"

#include <glib.h>
#include <glib-unix.h>

typedef struct {
    GSource source;
    gpointer tag;
    glib_driver_timeout_fn timeout;
    glib_driver_run_fn run;
    void *context;
    GMainLoop *loop;
    glib_driver_report *report;
} DriverSource;

static gboolean driver_prepare(GSource *source, gint *timeout) {
    DriverSource *driver = (DriverSource *)source;
    *timeout = driver->timeout(driver->context);
    return *timeout == 0;
}

static gboolean driver_check(GSource *source) {
    DriverSource *driver = (DriverSource *)source;
    if (g_source_query_unix_fd(source, driver->tag) & G_IO_IN) return TRUE;
    return driver->timeout(driver->context) == 0;
}

static gboolean driver_dispatch(GSource *source, GSourceFunc callback, gpointer data) {
    (void)callback;
    (void)data;
    DriverSource *driver = (DriverSource *)source;
    driver->report->dispatches += 1;
    if (g_source_query_unix_fd(source, driver->tag) & G_IO_IN) driver->report->readable += 1;
    if (!driver->run(driver->context)) g_main_loop_quit(driver->loop);
    return G_SOURCE_CONTINUE;
}

static GSourceFuncs driver_funcs = {driver_prepare, driver_check, driver_dispatch, NULL, NULL, NULL};

static gboolean glib_tick(gpointer data) {
    ((glib_driver_report *)data)->glib_ticks += 1;
    return G_SOURCE_CONTINUE;
}

typedef struct {
    GMainLoop *loop;
    glib_driver_report *report;
} Limit;

static gboolean limit_passed(gpointer data) {
    Limit *limit = data;
    limit->report->timed_out = 1;
    g_main_loop_quit(limit->loop);
    return G_SOURCE_REMOVE;
}

glib_driver_report glib_driver_run(int fd, glib_driver_timeout_fn timeout, glib_driver_run_fn run, void *context,
                                   int limit_ms) {
    glib_driver_report report = {0, 0, 0, 0};
    GMainContext *main_context = g_main_context_new();
    GMainLoop *loop = g_main_loop_new(main_context, FALSE);

    DriverSource *driver = (DriverSource *)g_source_new(&driver_funcs, sizeof(DriverSource));
    driver->tag = g_source_add_unix_fd(&driver->source, fd, G_IO_IN);
    driver->timeout = timeout;
    driver->run = run;
    driver->context = context;
    driver->loop = loop;
    driver->report = &report;
    g_source_attach(&driver->source, main_context);

    GSource *tick = g_timeout_source_new(10);
    g_source_set_callback(tick, glib_tick, &report, NULL);
    g_source_attach(tick, main_context);

    Limit limit = {loop, &report};
    GSource *deadline = g_timeout_source_new((guint)limit_ms);
    g_source_set_callback(deadline, limit_passed, &limit, NULL);
    g_source_attach(deadline, main_context);

    g_main_context_push_thread_default(main_context);
    g_main_loop_run(loop);
    g_main_context_pop_thread_default(main_context);

    g_source_destroy(deadline);
    g_source_unref(deadline);
    g_source_destroy(tick);
    g_source_unref(tick);
    g_source_destroy(&driver->source);
    g_source_unref(&driver->source);
    g_main_loop_unref(loop);
    g_main_context_unref(main_context);
    return report;
}
