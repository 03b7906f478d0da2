// The datagram workloads on libuv (raw_libuv_udp_echo, raw_libuv_udp_flood in
// include/raw_libuv.h), the way libuv's documentation uses uv_udp_t: each side is a uv_udp_t on
// a uv_loop_t of its own thread, bound with uv_udp_bind; it receives with uv_udp_recv_start
// (initialised with UV_UDP_RECVMMSG, so that libuv reads up to 20 datagrams per recvmmsg into
// one static buffer from the alloc callback) and sends with uv_udp_try_send, falling back on
// uv_udp_send (a request allocated for it) only when the kernel's buffer is full.
//
// Echo: the client sends a message, the server sends each datagram back to its sender, the
// client sends the next once the reply is in; a 1-byte datagram tells the server to stop.
// Flood: the sender keeps at most `window` datagrams unacknowledged; the receiver acknowledges
// every 64th (and the last) with its count so far, in an 8-byte datagram.

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <uv.h>

#include "raw_libuv.h"
#include "raw_peer.h"

#define UDP_BUFFER (20 * 65536)
#define ACK_EVERY 64

typedef struct udp_side udp_side;

/// One side of a run: its loop, socket, timeout timer and buffer, on one thread.
struct udp_side {
    uv_loop_t loop;
    uv_udp_t udp;
    uv_timer_t timer;
    struct sockaddr_in address;  // where this side is bound
    struct sockaddr_in peer;     // the other side
    int is_server;               // echo server, or flood receiver
    int echo;                    // 1: echo, 0: flood
    long long target;            // round trips, or datagrams
    long long count;             // round trips done, datagrams received, or datagrams sent
    long long acked;             // flood sender: the receiver's count
    int window;
    int message;
    char bytes[256];
    int timed_out;
    int failed;
    double start, end;
    char *buffer;
};

static void alloc_buffer(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
    (void)suggested;
    udp_side *side = handle->data;
    *buf = uv_buf_init(side->buffer, UDP_BUFFER);
}

static void sent_later(uv_udp_send_t *request, int status) {
    (void)status;
    free(request);
}

/// uv_udp_try_send, or uv_udp_send of a copy when the kernel's buffer is full.
static void send_datagram(udp_side *side, const char *bytes, size_t length, const struct sockaddr *to) {
    uv_buf_t buf = uv_buf_init((char *)bytes, (unsigned int)length);
    int sent = uv_udp_try_send(&side->udp, &buf, 1, to);
    if (sent >= 0) return;
    if (sent != UV_EAGAIN) {
        side->failed = 1;
        uv_stop(&side->loop);
        return;
    }
    uv_udp_send_t *request = malloc(sizeof *request + length);
    memcpy((char *)(request + 1), bytes, length);
    buf = uv_buf_init((char *)(request + 1), (unsigned int)length);
    uv_udp_send(request, &side->udp, &buf, 1, to, sent_later);
}

static void flood_fill(udp_side *side) {
    while (side->count < side->target && side->count - side->acked < side->window) {
        send_datagram(side, side->bytes, (size_t)side->message, (const struct sockaddr *)&side->peer);
        side->count++;
    }
}

static void received(uv_udp_t *udp, ssize_t nread, const uv_buf_t *buf, const struct sockaddr *from, unsigned flags) {
    udp_side *side = udp->data;
    (void)flags;
    if (nread <= 0 || from == NULL) return;  // nothing more now, or the end of a recvmmsg batch
    if (side->echo) {
        if (side->is_server) {
            if (nread == 1) {
                uv_stop(&side->loop);
                return;
            }
            send_datagram(side, buf->base, (size_t)nread, from);
            return;
        }
        if (++side->count == side->target) {
            side->end = raw_mono_now();
            send_datagram(side, "x", 1, (const struct sockaddr *)&side->peer);
            uv_stop(&side->loop);
            return;
        }
        send_datagram(side, side->bytes, (size_t)side->message, (const struct sockaddr *)&side->peer);
        return;
    }
    if (side->is_server) {
        side->count++;
        if (side->count % ACK_EVERY == 0 || side->count == side->target) {
            long long count = side->count;
            send_datagram(side, (const char *)&count, sizeof count, from);
        }
        if (side->count == side->target) {
            side->end = raw_mono_now();
            uv_stop(&side->loop);
        }
        return;
    }
    if (nread == sizeof(long long)) {
        long long acked;
        memcpy(&acked, buf->base, sizeof acked);
        if (acked > side->acked) side->acked = acked;
    }
    if (side->acked == side->target) {
        uv_stop(&side->loop);
        return;
    }
    flood_fill(side);
}

static void timed_out(uv_timer_t *timer) {
    udp_side *side = timer->data;
    side->timed_out = 1;
    uv_stop(&side->loop);
}

static void closed(uv_handle_t *handle) { (void)handle; }

static int side_open(udp_side *side, double timeout) {
    side->buffer = malloc(UDP_BUFFER);
    if (uv_loop_init(&side->loop) != 0) return -1;
    uv_udp_init_ex(&side->loop, &side->udp, AF_INET | UV_UDP_RECVMMSG);
    side->udp.data = side;
    struct sockaddr_in any;
    uv_ip4_addr("127.0.0.1", 0, &any);
    if (uv_udp_bind(&side->udp, (const struct sockaddr *)&any, 0) != 0) return -1;
    int length = sizeof side->address;
    uv_udp_getsockname(&side->udp, (struct sockaddr *)&side->address, &length);
    int receive_buffer = 4 << 20;
    uv_recv_buffer_size((uv_handle_t *)&side->udp, &receive_buffer);
    uv_timer_init(&side->loop, &side->timer);
    side->timer.data = side;
    uv_timer_start(&side->timer, timed_out, (uint64_t)(timeout * 1000), 0);
    uv_unref((uv_handle_t *)&side->timer);
    return 0;
}

static void side_close(udp_side *side) {
    uv_close((uv_handle_t *)&side->udp, closed);
    uv_close((uv_handle_t *)&side->timer, closed);
    uv_run(&side->loop, UV_RUN_DEFAULT);
    uv_loop_close(&side->loop);
    free(side->buffer);
}

static void *serve(void *context) {
    udp_side *side = context;
    uv_udp_recv_start(&side->udp, alloc_buffer, received);
    uv_run(&side->loop, UV_RUN_DEFAULT);
    return NULL;
}

static raw_sock_result run(int echo, long long target, int message, int window, double timeout) {
    raw_sock_result result = {0};
    udp_side *server = calloc(1, sizeof *server), *client = calloc(1, sizeof *client);
    if (side_open(server, timeout + 1) != 0 || side_open(client, timeout) != 0) {
        result.failure = "uv_udp_bind";
        return result;
    }
    server->is_server = 1;
    server->echo = client->echo = echo;
    server->target = client->target = target;
    client->window = window;
    client->message = message;
    memset(client->bytes, 'm', sizeof client->bytes);
    server->peer = client->address;
    client->peer = server->address;
    pthread_t thread;
    if (pthread_create(&thread, NULL, serve, server) != 0) {
        result.failure = "pthread_create";
        return result;
    }
    uv_udp_recv_start(&client->udp, alloc_buffer, received);
    client->start = raw_mono_now();
    if (echo) {
        send_datagram(client, client->bytes, (size_t)message, (const struct sockaddr *)&client->peer);
    } else {
        flood_fill(client);
    }
    uv_run(&client->loop, UV_RUN_DEFAULT);
    // An echo server waits for the stop datagram; a flood receiver stops at its last datagram.
    if (echo && (client->timed_out || client->failed)) {
        send_datagram(client, "x", 1, (const struct sockaddr *)&client->peer);
    }
    pthread_join(thread, NULL);
    double end = echo ? client->end : server->end;
    result.count = echo ? client->count : server->count;
    result.ok = !client->timed_out && !client->failed && !server->timed_out && result.count == target;
    result.seconds = end - client->start;
    if (!result.ok) result.failure = client->timed_out || server->timed_out ? "timed out" : "send failed";
    side_close(client);
    side_close(server);
    free(client);
    free(server);
    return result;
}

raw_sock_result raw_libuv_udp_echo(int round_trips, int message, double timeout_seconds) {
    return run(1, round_trips, message, 1, timeout_seconds);
}

raw_sock_result raw_libuv_udp_flood(long long datagrams, int message, int window, double timeout_seconds) {
    return run(0, datagrams, message, window, timeout_seconds);
}
