// The server I/O workloads on libuv (include/raw_peer_sockets.h of CRawPeer), the way libuv's own
// examples and Node.js use it: every connection is a uv_tcp_t stream; the server takes the
// driver's listening socket with uv_tcp_open and accepts from its uv_listen callback; clients
// connect with uv_tcp_connect; both ends set TCP_NODELAY (uv_tcp_nodelay), as the libevent peer
// does.
//
// Reads: uv_read_start with an alloc callback that hands out one 64 KiB buffer per loop, reused
// by every connection of that loop (64 KiB is libuv's suggested size; Node.js reads into one
// shared buffer the same way). The read callback is done with the bytes before the next alloc,
// so no connection holds a buffer of its own, idle or not; libuv reads up to 32 times per wake-up
// while each read fills the buffer.
//
// Writes: uv_try_write first; only what the kernel did not take goes to uv_write, in a request
// allocated for it, with a copy of the bytes where they do not outlive the write (the echo
// server's, which sit in the shared read buffer). The bulk chunk is the same bytes every time
// and outlives the run, so it is written by reference. The bulk sender's backpressure is the
// stream's write_queue_size, the bytes uv_write still holds: it writes chunks until that reaches
// the high watermark, and again from the write callback once it has fallen to the low one.
//
// uv_close is asynchronous: unserve and close_clients close every handle (the descriptors are
// closed at once), and the last close callback frees the server or the clients.

#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "raw_libuv_loop.h"
#include "raw_libuv_sockets.h"
#include "raw_peer_sockets.h"

#define READ_BUFFER (64 * 1024)

/// A client connection; its handle's `data` is its set.
typedef struct {
    uv_tcp_t tcp;  // first: the stream's address is the client's
    uv_connect_t connect;
    int remaining;  // echo: round trips to go
    int reply;      // echo: bytes of the current reply so far
    double sent_at;
} uvs_client;

/// The server or the clients of a run on one loop; every handle's `data` points here.
typedef struct {
    raw_sock_run *run;
    uv_loop_t *uv;
    uv_tcp_t listener;     // server
    uv_tcp_t **accepted;   // server: the connections accepted, each malloc'd
    uvs_client *clients;   // clients: room for every connection of the run
    int count;             // connections accepted, or clients started
    int open;              // handles whose close callback has not run yet
    int closed;            // unserve or close_clients has run: freed with the last handle
    char buffer[READ_BUFFER];
} uvs_set;

static uvs_set *set_new(void *loop, raw_sock_run *run) {
    uvs_set *set = calloc(1, sizeof *set);
    if (!set) abort();
    set->run = run;
    set->uv = &((uvl_loop *)loop)->uv;
    return set;
}

static void set_release(uvs_set *set) {
    if (--set->open > 0 || !set->closed) return;
    free(set->accepted);
    free(set->clients);
    free(set);
}

/// The close callback of a handle inside a set.
static void embedded_closed(uv_handle_t *handle) { set_release(handle->data); }

/// The close callback of an accepted connection, which has an allocation of its own.
static void accepted_closed(uv_handle_t *handle) {
    uvs_set *set = handle->data;
    free(handle);
    set_release(set);
}

/// Marks the set closed once every one of its handles is closing; frees it if none is left.
static void set_close(uvs_set *set) {
    set->closed = 1;
    set->open++;
    set_release(set);
}

static void tcp_init(uvs_set *set, uv_tcp_t *tcp) {
    uv_tcp_init(set->uv, tcp);
    tcp->data = set;
    set->open++;
}

/// Every read of the set's connections goes to the set's one buffer.
static void alloc_shared(uv_handle_t *handle, size_t suggested_size, uv_buf_t *buf) {
    (void)suggested_size;
    uvs_set *set = handle->data;
    *buf = uv_buf_init(set->buffer, READ_BUFFER);
}

/// A uv_write request, with room for a copy of the bytes it writes.
typedef struct {
    uv_write_t req;
    char bytes[];
} uvs_write;

static void bulk_fill(uvs_client *client);

static void written(uv_write_t *req, int status) {
    uv_stream_t *stream = req->handle;
    free(req);
    uvs_set *set = stream->data;
    // Only clients write in bulk runs (the server drains); status < 0: cancelled by a close.
    if (status == 0 && set->run->kind == RAW_SOCK_BULK &&
        stream->write_queue_size <= (size_t)set->run->low_watermark) {
        bulk_fill((uvs_client *)stream);
    }
}

/// Writes `length` bytes: what the kernel takes now, the rest through uv_write (a copy of it
/// with `copy`, for bytes that do not outlive the write). An error leaves the run to time out.
static void send_bytes(uv_stream_t *stream, const char *bytes, size_t length, int copy) {
    uv_buf_t buf = uv_buf_init((char *)bytes, (unsigned)length);
    int sent = uv_try_write(stream, &buf, 1);
    if (sent == (int)length) return;
    if (sent < 0) {
        if (sent != UV_EAGAIN) return;
        sent = 0;
    }
    size_t rest = length - (size_t)sent;
    uvs_write *write = malloc(sizeof *write + (copy ? rest : 0));
    if (!write) abort();
    char *base = copy ? memcpy(write->bytes, bytes + sent, rest) : (char *)bytes + sent;
    buf = uv_buf_init(base, (unsigned)rest);
    if (uv_write(&write->req, stream, &buf, 1, written) != 0) free(write);
}

// MARK: Server

static void server_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
    uvs_set *set = stream->data;
    if (nread < 0) {
        // End of stream or an error: the client went away; closed with the server.
        uv_read_stop(stream);
        return;
    }
    if (nread == 0) return;
    if (set->run->kind == RAW_SOCK_BULK) {
        raw_sock_received(set->run, nread);
    } else if (set->run->kind == RAW_SOCK_ECHO) {
        send_bytes(stream, buf->base, (size_t)nread, 1);
    }
}

static void server_accept(uv_stream_t *listener, int status) {
    uvs_set *set = listener->data;
    if (status < 0) return;
    uv_tcp_t *tcp = malloc(sizeof *tcp);
    if (!tcp) abort();
    tcp_init(set, tcp);
    if (uv_accept(listener, (uv_stream_t *)tcp) != 0 || set->count == set->run->connections) {
        uv_close((uv_handle_t *)tcp, accepted_closed);
        return;
    }
    uv_tcp_nodelay(tcp, 1);
    set->accepted[set->count++] = tcp;
    raw_sock_accepted(set->run);
    uv_read_start((uv_stream_t *)tcp, alloc_shared, server_read);
}

static void *uvs_serve(void *loop, int listen_fd, raw_sock_run *run) {
    uvs_set *set = set_new(loop, run);
    set->accepted = calloc((size_t)run->connections, sizeof *set->accepted);
    if (!set->accepted) abort();
    tcp_init(set, &set->listener);
    if (uv_tcp_open(&set->listener, listen_fd) != 0) {
        close(listen_fd);  // not the handle's: the run times out
    } else {
        // The socket is listening already; 1024 is the backlog it has (as RunLoopKit's listener).
        uv_listen((uv_stream_t *)&set->listener, 1024, server_accept);
    }
    return set;
}

static void uvs_unserve(void *server) {
    uvs_set *set = server;
    uv_close((uv_handle_t *)&set->listener, embedded_closed);
    for (int i = 0; i < set->count; i++) uv_close((uv_handle_t *)set->accepted[i], accepted_closed);
    set_close(set);
}

// MARK: Clients

static void bulk_fill(uvs_client *client) {
    uv_stream_t *stream = (uv_stream_t *)&client->tcp;
    raw_sock_run *run = ((uvs_set *)stream->data)->run;
    while (raw_sock_bulk_next(run, (long long)stream->write_queue_size)) {
        send_bytes(stream, run->chunk_bytes, (size_t)run->chunk, 0);
    }
}

static void client_send(uvs_client *client) {
    raw_sock_run *run = ((uvs_set *)client->tcp.data)->run;
    if (run->kind == RAW_SOCK_BULK) {
        bulk_fill(client);
        return;
    }
    client->sent_at = raw_mono_now();
    // The message lives in the run, which outlives every write.
    send_bytes((uv_stream_t *)&client->tcp, run->message_bytes, (size_t)run->message, 0);
}

static void client_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
    (void)buf;
    if (nread < 0) {
        uv_read_stop(stream);  // the server went away: the run times out
        return;
    }
    // Only the echo server writes back.
    uvs_client *client = (uvs_client *)stream;
    raw_sock_run *run = ((uvs_set *)stream->data)->run;
    client->reply += (int)nread;
    while (client->reply >= run->message) {
        client->reply -= run->message;
        if (raw_sock_echo_reply(run, client->sent_at, &client->remaining)) client_send(client);
    }
}

static void clients_start(uvs_set *set);

static void client_connected(uv_connect_t *req, int status) {
    // status < 0: refused (the run times out) or cancelled by close_clients.
    if (status < 0) return;
    uvs_client *client = (uvs_client *)req->handle;
    uvs_set *set = client->tcp.data;
    uv_tcp_nodelay(&client->tcp, 1);
    uv_read_start((uv_stream_t *)&client->tcp, alloc_shared, client_read);
    int last = raw_sock_connected(set->run);
    if (set->run->kind == RAW_SOCK_IDLE) {
        clients_start(set);
    } else if (last) {
        for (int i = 0; i < set->count; i++) client_send(&set->clients[i]);
    }
}

static void clients_start(uvs_set *set) {
    raw_sock_run *run = set->run;
    while (raw_sock_should_connect(run)) {
        uvs_client *client = &set->clients[set->count++];
        client->remaining = run->round_trips;
        tcp_init(set, &client->tcp);
        // A failure leaves the run to time out.
        uv_tcp_connect(&client->connect, &client->tcp, (const struct sockaddr *)&run->address, client_connected);
    }
}

static void *uvs_open_clients(void *loop, raw_sock_run *run) {
    uvs_set *set = set_new(loop, run);
    set->clients = calloc((size_t)run->connections, sizeof *set->clients);
    if (!set->clients) abort();
    clients_start(set);
    return set;
}

static void uvs_close_clients(void *clients) {
    uvs_set *set = clients;
    for (int i = 0; i < set->count; i++) uv_close((uv_handle_t *)&set->clients[i].tcp, embedded_closed);
    set_close(set);
}

const raw_socket_ops uvs_socket_ops = {uvs_serve, uvs_unserve, uvs_open_clients, uvs_close_clients};
