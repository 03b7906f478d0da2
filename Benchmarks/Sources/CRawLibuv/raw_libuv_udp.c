// The datagram workloads on libuv (raw_libuv_udp_echo, raw_libuv_udp_flood in
// include/raw_libuv.h), the way libuv's documentation uses uv_udp_t: each side is a uv_udp_t on
// a uv_loop_t of its own thread, bound with uv_udp_bind; it receives with uv_udp_recv_start
// (initialised with UV_UDP_RECVMMSG, so that libuv reads up to 20 datagrams per recvmmsg into
// one static buffer from the alloc callback) and sends with uv_udp_try_send, falling back on
// uv_udp_send (a request allocated for it, with a copy) only when the kernel's buffer is full.
// The protocol is CRawPeer's (include/raw_peer_udp.h).

#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "raw_libuv.h"
#include "raw_peer_udp.h"

#define UDP_BUFFER (20 * 65536)

/// One side of a run: its loop, socket, timeout timer and buffer, on one thread.
typedef struct {
    raw_udp_side protocol;
    uv_loop_t loop;
    uv_udp_t udp;
    uv_timer_t timer;
    struct sockaddr_in address;  // where this side is bound
    struct sockaddr_in peer;     // the other side
    char *buffer;
} uv_side;

static void alloc_buffer(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
    (void)suggested;
    uv_side *side = handle->data;
    *buf = uv_buf_init(side->buffer, UDP_BUFFER);
}

static void sent_later(uv_udp_send_t *request, int status) {
    (void)status;
    free(request);
}

/// uv_udp_try_send, or uv_udp_send of a copy when the kernel's buffer is full.
static void send_datagram(uv_side *side, const void *bytes, size_t length, const struct sockaddr *to) {
    uv_buf_t buf = uv_buf_init((char *)bytes, (unsigned int)length);
    int sent = uv_udp_try_send(&side->udp, &buf, 1, to);
    if (sent >= 0) return;
    if (sent != UV_EAGAIN) {
        side->protocol.failed = 1;
        uv_stop(&side->loop);
        return;
    }
    uv_udp_send_t *request = malloc(sizeof *request + length);
    memcpy(request + 1, bytes, length);
    buf = uv_buf_init((char *)(request + 1), (unsigned int)length);
    uv_udp_send(request, &side->udp, &buf, 1, to, sent_later);
}

static void fill(uv_side *side) {
    while (raw_udp_may_send(&side->protocol)) {
        send_datagram(side, side->protocol.bytes, (size_t)side->protocol.message, (const struct sockaddr *)&side->peer);
    }
}

static void received(uv_udp_t *udp, ssize_t nread, const uv_buf_t *buf, const struct sockaddr *from, unsigned flags) {
    (void)flags;
    uv_side *side = udp->data;
    if (nread <= 0 || from == NULL) return;  // nothing more now, or the end of a recvmmsg batch
    int actions = raw_udp_received(&side->protocol, buf->base, (size_t)nread);
    const struct sockaddr *peer = (const struct sockaddr *)&side->peer;
    if (actions & RAW_UDP_REPLY) send_datagram(side, buf->base, (size_t)nread, from);
    if (actions & RAW_UDP_SEND) send_datagram(side, side->protocol.bytes, (size_t)side->protocol.message, peer);
    if (actions & RAW_UDP_ACK) send_datagram(side, &side->protocol.ack, sizeof side->protocol.ack, from);
    if (actions & RAW_UDP_FILL) fill(side);
    if (actions & RAW_UDP_SEND_STOP) send_datagram(side, "x", 1, peer);
    if (actions & RAW_UDP_STOP) uv_stop(&side->loop);
}

static void timed_out(uv_timer_t *timer) {
    uv_side *side = timer->data;
    side->protocol.timed_out = 1;
    uv_stop(&side->loop);
}

static void closed(uv_handle_t *handle) { (void)handle; }

static int side_open(uv_side *side, double timeout) {
    side->buffer = malloc(UDP_BUFFER);
    if (!side->buffer || uv_loop_init(&side->loop) != 0) return -1;
    uv_udp_init_ex(&side->loop, &side->udp, AF_INET | UV_UDP_RECVMMSG);
    side->udp.data = side;
    uv_timer_init(&side->loop, &side->timer);
    side->timer.data = side;
    struct sockaddr_in any;
    uv_ip4_addr("127.0.0.1", 0, &any);
    if (uv_udp_bind(&side->udp, (const struct sockaddr *)&any, 0) != 0) return -1;
    int length = sizeof side->address;
    uv_udp_getsockname(&side->udp, (struct sockaddr *)&side->address, &length);
    int receive_buffer = 4 << 20;
    uv_recv_buffer_size((uv_handle_t *)&side->udp, &receive_buffer);
    uv_timer_start(&side->timer, timed_out, (uint64_t)(timeout * 1000), 0);
    uv_unref((uv_handle_t *)&side->timer);
    return 0;
}

static void side_close(uv_side *side) {
    uv_close((uv_handle_t *)&side->udp, closed);
    uv_close((uv_handle_t *)&side->timer, closed);
    uv_run(&side->loop, UV_RUN_DEFAULT);
    uv_loop_close(&side->loop);
    free(side->buffer);
}

static void *serve(void *context) {
    uv_side *side = context;
    uv_udp_recv_start(&side->udp, alloc_buffer, received);
    uv_run(&side->loop, UV_RUN_DEFAULT);
    return NULL;
}

static raw_sock_result run(int echo, long long target, int message, int window, double timeout) {
    raw_sock_result result = {0};
    uv_side *server = calloc(1, sizeof *server), *client = calloc(1, sizeof *client);
    pthread_t thread;
    if (side_open(server, timeout + 1) != 0 || side_open(client, timeout) != 0) {
        result.failure = "uv_udp_bind";
        return result;  // a setup failure leaks the sides: the run is over either way
    }
    raw_udp_prepare(&client->protocol, &server->protocol, echo, target, message, window);
    server->peer = client->address;
    client->peer = server->address;
    if (pthread_create(&thread, NULL, serve, server) != 0) abort();
    uv_udp_recv_start(&client->udp, alloc_buffer, received);
    client->protocol.start = raw_mono_now();
    if (echo) {
        send_datagram(client, client->protocol.bytes, (size_t)message, (const struct sockaddr *)&client->peer);
    } else {
        fill(client);
    }
    uv_run(&client->loop, UV_RUN_DEFAULT);
    // An echo server waits for the stop datagram; a flood receiver stops at its last datagram.
    if (echo && (client->protocol.timed_out || client->protocol.failed)) {
        send_datagram(client, "x", 1, (const struct sockaddr *)&client->peer);
    }
    pthread_join(thread, NULL);
    result = raw_udp_result(&client->protocol, &server->protocol);
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
