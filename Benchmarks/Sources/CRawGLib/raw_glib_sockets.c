// The server I/O workloads on GLib (include/raw_peer_sockets.h of CRawPeer): non-blocking sockets
// watched by GUnixFDSources (g_unix_fd_source_new, attached to the loop's own context: what
// g_unix_fd_add does on the default one), read and written with plain recv/send/sendmsg. Both
// ends set TCP_NODELAY, as the libevent peer does.
//
// Why not GIO's GSocket and GSocketSource: a GSocketSource is the same poll record
// (g_source_add_unix_fd) behind a GObject per socket, and every would-block read or write comes
// back as an allocated GError, the common case for a server on non-blocking sockets. The
// higher-level GIO way (GSocketService, GIOStream and asynchronous writes) runs each operation
// through a GTask. GUnixFDSource is the main loop's own descriptor source, on the lower layer
// that GIO is built on, and the one a GLib user after throughput on Unix reaches for.
//
// Reads: one 64 KiB buffer per loop, shared by its connections (each read is consumed before the
// next), up to four reads per wake-up while each fills the buffer, as the libevent peer's bulk
// reader and RunLoopKit. Writes: straight to the kernel while nothing is queued; what it does not
// take goes to the connection's output queue, a GQueue of GBytes (a copy of the bytes, or for the
// bulk chunk, which is the same bytes every time, a reference to one static GBytes), sent oldest
// first with sendmsg (64 chunks at most per call) from a G_IO_OUT source that exists while
// anything is queued. The bulk sender's backpressure is the bytes in that queue: it queues
// chunks until it holds the high watermark and sends, and again once it has fallen to the low
// one.

#define _GNU_SOURCE
#include <sys/socket.h>
#include <sys/uio.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <errno.h>
#include <glib-unix.h>
#include <stdlib.h>
#include <unistd.h>

#include "raw_glib_loop.h"
#include "raw_glib_sockets.h"
#include "raw_peer_sockets.h"

#define READ_BUFFER (64 * 1024)
#define READS_PER_WAKEUP 4
#define CHUNKS_PER_SEND 64

typedef struct gls_set gls_set;

/// A connection, server or client side.
typedef struct {
    gls_set *set;
    int fd;
    GSource *reader;  // G_IO_IN (a client's G_IO_OUT until it is connected)
    GSource *writer;  // G_IO_OUT, while output is queued
    GQueue output;    // GBytes, oldest first
    gsize written;    // bytes of the oldest already sent
    gsize queued;     // bytes in `output` not sent yet
    int remaining;    // echo client: round trips to go
    int reply;        // echo client: bytes of the current reply so far
    double sent_at;
} gls_conn;

/// The server or the clients of a run on one loop.
struct gls_set {
    raw_sock_run *run;
    GMainContext *context;
    /// What the set does with the bytes a connection read.
    void (*consume)(gls_conn *conn, const char *bytes, gsize length);
    int listen_fd;       // server
    GSource *listener;   // server
    gls_conn **conns;    // the connections accepted or opened
    int count;
    GBytes *chunk;       // bulk client: what every write sends
    char buffer[READ_BUFFER];
};

static GSource *watch(GMainContext *context, int fd, GIOCondition condition, GUnixFDSourceFunc fn, gpointer data) {
    GSource *source = g_unix_fd_source_new(fd, condition);
    g_source_set_callback(source, G_SOURCE_FUNC(fn), data, NULL);
    g_source_attach(source, context);
    return source;
}

/// Destroys the source and drops the reference kept to it (also from the source's own callback).
static void unwatch(GSource **source) {
    if (!*source) return;
    g_source_destroy(*source);
    g_source_unref(*source);
    *source = NULL;
}

static void no_delay(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static gls_set *set_new(void *loop, raw_sock_run *run, void (*consume)(gls_conn *, const char *, gsize)) {
    gls_set *set = g_new0(gls_set, 1);
    set->run = run;
    set->context = ((gl_loop *)loop)->context;
    set->consume = consume;
    set->listen_fd = -1;
    set->conns = g_new0(gls_conn *, run->connections);
    return set;
}

static gls_conn *conn_new(gls_set *set, int fd) {
    gls_conn *conn = g_new0(gls_conn, 1);
    conn->set = set;
    conn->fd = fd;
    g_queue_init(&conn->output);
    set->conns[set->count++] = conn;
    return conn;
}

/// Frees every connection and the set.
static void set_free(gls_set *set) {
    for (int i = 0; i < set->count; i++) {
        gls_conn *conn = set->conns[i];
        unwatch(&conn->reader);
        unwatch(&conn->writer);
        if (conn->fd >= 0) close(conn->fd);
        g_queue_clear_full(&conn->output, (GDestroyNotify)g_bytes_unref);
        g_free(conn);
    }
    unwatch(&set->listener);
    if (set->listen_fd >= 0) close(set->listen_fd);
    if (set->chunk) g_bytes_unref(set->chunk);
    g_free(set->conns);
    g_free(set);
}

// MARK: Reads and writes

static gboolean readable(int fd, GIOCondition condition, gpointer data) {
    (void)condition;
    gls_conn *conn = data;
    gls_set *set = conn->set;
    for (int i = 0; i < READS_PER_WAKEUP; i++) {
        ssize_t count = recv(fd, set->buffer, READ_BUFFER, 0);
        if (count > 0) {
            set->consume(conn, set->buffer, (gsize)count);
            if (count < READ_BUFFER) break;  // the kernel had no more
        } else if (count == 0 || (errno != EAGAIN && errno != EINTR)) {
            // End of stream or an error: the other side went away; closed with the set.
            unwatch(&conn->reader);
            return G_SOURCE_REMOVE;
        } else {
            break;
        }
    }
    return G_SOURCE_CONTINUE;
}

/// Drops the `sent` bytes at the front of the output queue.
static void output_sent(gls_conn *conn, gsize sent) {
    conn->queued -= sent;
    sent += conn->written;
    while (!g_queue_is_empty(&conn->output)) {
        gsize size = g_bytes_get_size(g_queue_peek_head(&conn->output));
        if (sent < size) break;
        sent -= size;
        g_bytes_unref(g_queue_pop_head(&conn->output));
    }
    conn->written = sent;
}

/// Sends the output queue until it is empty or the kernel takes no more; 0 if the other side
/// went away (the queue is then dropped).
static int flush(gls_conn *conn) {
    while (conn->queued > 0) {
        struct iovec vectors[CHUNKS_PER_SEND];
        int count = 0;
        gsize offset = conn->written;
        for (GList *link = conn->output.head; link && count < CHUNKS_PER_SEND; link = link->next) {
            gsize size;
            const char *bytes = g_bytes_get_data(link->data, &size);
            vectors[count].iov_base = (char *)bytes + offset;
            vectors[count].iov_len = size - offset;
            count++;
            offset = 0;
        }
        struct msghdr message = {.msg_iov = vectors, .msg_iovlen = (size_t)count};
        ssize_t sent = sendmsg(conn->fd, &message, MSG_NOSIGNAL);
        if (sent > 0) {
            output_sent(conn, (gsize)sent);
        } else if (errno == EAGAIN) {
            break;
        } else if (errno != EINTR) {
            g_queue_clear_full(&conn->output, (GDestroyNotify)g_bytes_unref);
            conn->queued = conn->written = 0;
            return 0;
        }
    }
    return 1;
}

static gboolean writable(int fd, GIOCondition condition, gpointer data);

/// Watches for writability while output is queued, and only then.
static void update_writer(gls_conn *conn) {
    if (conn->queued > 0 && !conn->writer) {
        conn->writer = watch(conn->set->context, conn->fd, G_IO_OUT, writable, conn);
    } else if (conn->queued == 0) {
        unwatch(&conn->writer);
    }
}

static void output_push(gls_conn *conn, GBytes *bytes) {
    conn->queued += g_bytes_get_size(bytes);
    g_queue_push_tail(&conn->output, bytes);
}

/// Sends `length` bytes: straight to the kernel while nothing is queued, and what it does not
/// take (or all of it, behind queued output) as a copy at the end of the queue.
static void send_copy(gls_conn *conn, const char *bytes, gsize length) {
    gsize sent = 0;
    if (conn->queued == 0) {
        ssize_t count = send(conn->fd, bytes, length, MSG_NOSIGNAL);
        if (count < 0 && errno != EAGAIN && errno != EINTR) return;  // the other side went away
        if (count > 0) sent = (gsize)count;
        if (sent == length) return;
    }
    output_push(conn, g_bytes_new(bytes + sent, length - sent));
    update_writer(conn);
}

/// The bulk sender: queues chunks up to the high watermark and sends them, again while the
/// kernel takes them down to the low one.
static void bulk_fill(gls_conn *conn) {
    raw_sock_run *run = conn->set->run;
    int open = 1;
    while (open && conn->queued <= (gsize)run->low_watermark && run->sent < run->bulk_bytes) {
        while (raw_sock_bulk_next(run, (long long)conn->queued)) output_push(conn, g_bytes_ref(conn->set->chunk));
        open = flush(conn);
    }
    update_writer(conn);
}

static gboolean writable(int fd, GIOCondition condition, gpointer data) {
    (void)fd;
    (void)condition;
    gls_conn *conn = data;
    raw_sock_run *run = conn->set->run;
    // Only clients write in bulk runs (the server drains).
    if (flush(conn) && run->kind == RAW_SOCK_BULK && conn->queued <= (gsize)run->low_watermark) {
        bulk_fill(conn);
    } else {
        update_writer(conn);
    }
    return conn->writer ? G_SOURCE_CONTINUE : G_SOURCE_REMOVE;
}

// MARK: Server

static void server_consume(gls_conn *conn, const char *bytes, gsize length) {
    raw_sock_run *run = conn->set->run;
    if (run->kind == RAW_SOCK_BULK) {
        raw_sock_received(run, (long long)length);
    } else if (run->kind == RAW_SOCK_ECHO) {
        send_copy(conn, bytes, length);
    }
}

static gboolean acceptable(int fd, GIOCondition condition, gpointer data) {
    (void)condition;
    gls_set *set = data;
    for (;;) {
        int accepted = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (accepted < 0) break;  // EAGAIN: every pending connection taken (an error: the run times out)
        if (set->count == set->run->connections) {
            close(accepted);
            continue;
        }
        no_delay(accepted);
        gls_conn *conn = conn_new(set, accepted);
        conn->reader = watch(set->context, accepted, G_IO_IN, readable, conn);
        raw_sock_accepted(set->run);
    }
    return G_SOURCE_CONTINUE;
}

static void *gls_serve(void *loop, int listen_fd, raw_sock_run *run) {
    gls_set *set = set_new(loop, run, server_consume);
    set->listen_fd = listen_fd;
    set->listener = watch(set->context, listen_fd, G_IO_IN, acceptable, set);
    return set;
}

static void gls_unserve(void *server) { set_free(server); }

// MARK: Clients

static void client_send(gls_conn *conn) {
    raw_sock_run *run = conn->set->run;
    if (run->kind == RAW_SOCK_BULK) {
        bulk_fill(conn);
        return;
    }
    conn->sent_at = raw_mono_now();
    send_copy(conn, run->message_bytes, (gsize)run->message);
}

/// Only the echo server writes back.
static void client_consume(gls_conn *conn, const char *bytes, gsize length) {
    (void)bytes;
    raw_sock_run *run = conn->set->run;
    conn->reply += (int)length;
    while (conn->reply >= run->message) {
        conn->reply -= run->message;
        if (raw_sock_echo_reply(run, conn->sent_at, &conn->remaining)) client_send(conn);
    }
}

static void clients_start(gls_set *set);

static gboolean connected(int fd, GIOCondition condition, gpointer data) {
    (void)condition;
    gls_conn *conn = data;
    gls_set *set = conn->set;
    unwatch(&conn->reader);
    int error = 0;
    socklen_t length = sizeof error;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0 || error != 0) {
        return G_SOURCE_REMOVE;  // refused: the run times out
    }
    no_delay(fd);
    conn->reader = watch(set->context, fd, G_IO_IN, readable, conn);
    int last = raw_sock_connected(set->run);
    if (set->run->kind == RAW_SOCK_IDLE) {
        clients_start(set);
    } else if (last) {
        for (int i = 0; i < set->count; i++) client_send(set->conns[i]);
    }
    return G_SOURCE_REMOVE;
}

static void clients_start(gls_set *set) {
    raw_sock_run *run = set->run;
    while (raw_sock_should_connect(run)) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        gls_conn *conn = conn_new(set, fd);
        conn->remaining = run->round_trips;
        // A failure leaves the run to time out.
        if (fd < 0) continue;
        if (connect(fd, (const struct sockaddr *)&run->address, sizeof run->address) != 0 && errno != EINPROGRESS) {
            continue;
        }
        conn->reader = watch(set->context, fd, G_IO_OUT, connected, conn);
    }
}

static void *gls_open_clients(void *loop, raw_sock_run *run) {
    gls_set *set = set_new(loop, run, client_consume);
    if (run->kind == RAW_SOCK_BULK) set->chunk = g_bytes_new_static(run->chunk_bytes, (gsize)run->chunk);
    clients_start(set);
    return set;
}

static void gls_close_clients(void *clients) { set_free(clients); }

const raw_socket_ops gls_socket_ops = {gls_serve, gls_unserve, gls_open_clients, gls_close_clients};
