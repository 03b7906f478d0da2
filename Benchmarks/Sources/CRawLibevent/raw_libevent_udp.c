// The datagram workloads on raw libevent (raw_libevent_udp_echo, raw_libevent_udp_flood in
// include/raw_libevent.h): each side is a non-blocking UDP socket with a persistent EV_READ event
// on an event_base of its own thread (EVENT_BASE_FLAG_NOLOCK); the callback reads with recvfrom
// until EAGAIN and answers with sendto. A send the kernel would block (it does not on loopback
// with these windows) fails the echo, and resumes a flood from an EV_WRITE event. The protocol is
// CRawPeer's (include/raw_peer_udp.h).

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "raw_libevent.h"
#include "raw_peer_udp.h"

typedef struct {
    raw_udp_side protocol;
    struct event_base *base;
    struct event *readable;
    struct event *writable;
    struct event *timer;
    int fd;
    struct sockaddr_in address;
    struct sockaddr_in peer;
    char buffer[65536];
} ev_side;

/// sendto; 0 if the kernel's buffer was full, -1 (and the side stops) on any other failure.
static int send_to(ev_side *side, const void *bytes, size_t length, const struct sockaddr_in *to) {
    if (sendto(side->fd, bytes, length, MSG_DONTWAIT | MSG_NOSIGNAL, (const struct sockaddr *)to, sizeof *to) >= 0)
        return 1;
    if (errno == EAGAIN) return 0;
    side->protocol.failed = 1;
    event_base_loopbreak(side->base);
    return -1;
}

static void fill(ev_side *side) {
    while (raw_udp_may_send(&side->protocol)) {
        if (send_to(side, side->protocol.bytes, (size_t)side->protocol.message, &side->peer) == 0) {
            side->protocol.count--;  // not sent: again once writable
            event_add(side->writable, NULL);
            return;
        }
    }
}

static void on_writable(evutil_socket_t fd, short what, void *context) {
    (void)fd;
    (void)what;
    fill(context);
}

static void on_readable(evutil_socket_t fd, short what, void *context) {
    (void)what;
    ev_side *side = context;
    for (;;) {
        struct sockaddr_in from;
        socklen_t from_length = sizeof from;
        ssize_t got = recvfrom(fd, side->buffer, sizeof side->buffer, MSG_DONTWAIT, (struct sockaddr *)&from,
                               &from_length);
        if (got < 0) return;
        int actions = raw_udp_received(&side->protocol, side->buffer, (size_t)got);
        int sent = 1;
        if (actions & RAW_UDP_REPLY) sent = send_to(side, side->buffer, (size_t)got, &from);
        if (actions & RAW_UDP_SEND) {
            sent = send_to(side, side->protocol.bytes, (size_t)side->protocol.message, &side->peer);
        }
        if (actions & RAW_UDP_ACK) sent = send_to(side, &side->protocol.ack, sizeof side->protocol.ack, &from);
        if (actions & RAW_UDP_FILL) fill(side);
        if (actions & RAW_UDP_SEND_STOP) send_to(side, "x", 1, &side->peer);
        if (sent == 0) {
            side->protocol.failed = 1;
            actions |= RAW_UDP_STOP;
        }
        if (actions & RAW_UDP_STOP) {
            event_base_loopbreak(side->base);
            return;
        }
    }
}

static void on_timeout(evutil_socket_t fd, short what, void *context) {
    (void)fd;
    (void)what;
    ev_side *side = context;
    side->protocol.timed_out = 1;
    event_base_loopbreak(side->base);
}

static int side_open(ev_side *side, double timeout) {
    struct event_config *config = event_config_new();
    event_config_set_flag(config, EVENT_BASE_FLAG_NOLOCK);
    side->base = event_base_new_with_config(config);
    event_config_free(config);
    side->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (!side->base || side->fd < 0) return -1;
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(side->fd, (struct sockaddr *)&any, sizeof any) != 0) return -1;
    socklen_t length = sizeof side->address;
    getsockname(side->fd, (struct sockaddr *)&side->address, &length);
    int receive_buffer = 4 << 20;
    setsockopt(side->fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
    side->readable = event_new(side->base, side->fd, EV_READ | EV_PERSIST, on_readable, side);
    side->writable = event_new(side->base, side->fd, EV_WRITE, on_writable, side);
    side->timer = evtimer_new(side->base, on_timeout, side);
    struct timeval limit = {(time_t)timeout, (suseconds_t)((timeout - (double)(time_t)timeout) * 1e6)};
    event_add(side->readable, NULL);
    event_add(side->timer, &limit);
    return 0;
}

static void side_close(ev_side *side) {
    if (side->readable) event_free(side->readable);
    if (side->writable) event_free(side->writable);
    if (side->timer) event_free(side->timer);
    if (side->fd >= 0) close(side->fd);
    if (side->base) event_base_free(side->base);
}

static void *serve(void *context) {
    ev_side *side = context;
    event_base_dispatch(side->base);
    return NULL;
}

static raw_sock_result run(int echo, long long target, int message, int window, double timeout) {
    raw_sock_result result = {0};
    ev_side *server = calloc(1, sizeof *server), *client = calloc(1, sizeof *client);
    server->fd = client->fd = -1;
    pthread_t thread;
    if (side_open(server, timeout + 1) != 0 || side_open(client, timeout) != 0) {
        result.failure = "socket or bind";
        result.error = errno;
    } else {
        raw_udp_prepare(&client->protocol, &server->protocol, echo, target, message, window);
        server->peer = client->address;
        client->peer = server->address;
        if (pthread_create(&thread, NULL, serve, server) != 0) abort();
        client->protocol.start = raw_mono_now();
        if (echo) {
            send_to(client, client->protocol.bytes, (size_t)message, &client->peer);
        } else {
            fill(client);
        }
        event_base_dispatch(client->base);
        // An echo server waits for the stop datagram; a flood receiver stops at its last datagram.
        if (echo && (client->protocol.timed_out || client->protocol.failed)) send_to(client, "x", 1, &client->peer);
        pthread_join(thread, NULL);
        result = raw_udp_result(&client->protocol, &server->protocol);
    }
    side_close(client);
    side_close(server);
    free(client);
    free(server);
    return result;
}

raw_sock_result raw_libevent_udp_echo(int round_trips, int message, double timeout_seconds) {
    return run(1, round_trips, message, 1, timeout_seconds);
}

raw_sock_result raw_libevent_udp_flood(long long datagrams, int message, int window, double timeout_seconds) {
    return run(0, datagrams, message, window, timeout_seconds);
}
