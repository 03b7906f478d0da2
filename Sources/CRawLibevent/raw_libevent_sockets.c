// The server I/O workloads on libevent (include/raw_peer_sockets.h of CRawPeer): accepted and
// client connections are bufferevents, the listener an evconnlistener, all in libevent_core.
// Reads are up to 64 KiB at a time and writes up to 256 KiB (`bufferevent_set_max_single_read`
// and `_write`; libevent's defaults are 16 KiB), as RunLoopKit's, and the bulk sender refills its output buffer from the write callback, which its low watermark fires.

#define _GNU_SOURCE
// System headers before event2/*.h (Debian's event-config.h defines _GNU_SOURCE).
#include <sys/types.h>
#include <sys/time.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "raw_libevent_workloads.h"
#include "raw_peer_sockets.h"

static void no_delay(evutil_socket_t fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// MARK: Server

typedef struct {
    raw_sock_run *run;
    struct event_base *base;
    struct evconnlistener *listener;
    struct bufferevent **accepted;
    int count;
} lev_server;

static void server_read(struct bufferevent *bev, void *arg) {
    lev_server *server = arg;
    struct evbuffer *input = bufferevent_get_input(bev);
    if (server->run->kind == RAW_SOCK_ECHO) {
        bufferevent_write_buffer(bev, input);  // moves the bytes
        return;
    }
    size_t length = evbuffer_get_length(input);
    evbuffer_drain(input, length);
    raw_sock_received(server->run, (long long)length);
}

static void server_event(struct bufferevent *bev, short what, void *arg) {
    (void)arg;
    // The client went away: the connection is freed with the server.
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) bufferevent_disable(bev, EV_READ | EV_WRITE);
}

static void server_accept(struct evconnlistener *listener, evutil_socket_t fd, struct sockaddr *address, int length,
                          void *arg) {
    (void)listener;
    (void)address;
    (void)length;
    lev_server *server = arg;
    if (server->count == server->run->connections) {
        evutil_closesocket(fd);
        return;
    }
    no_delay(fd);
    struct bufferevent *bev = bufferevent_socket_new(server->base, fd, BEV_OPT_CLOSE_ON_FREE);
    bufferevent_set_max_single_read(bev, 64 * 1024);
    bufferevent_set_max_single_write(bev, 256 * 1024);
    bufferevent_setcb(bev, server_read, NULL, server_event, server);
    bufferevent_enable(bev, EV_READ);
    server->accepted[server->count++] = bev;
    raw_sock_accepted(server->run);
}

static void *lev_serve(void *loop, int listen_fd, raw_sock_run *run) {
    lev_server *server = calloc(1, sizeof *server);
    if (!server) abort();
    server->run = run;
    server->base = lev_loop_base(loop);
    server->accepted = calloc((size_t)run->connections, sizeof *server->accepted);
    if (!server->accepted) abort();
    // Backlog 0: the socket is listening already (1024, as RunLoopKit's listener).
    server->listener = evconnlistener_new(server->base, server_accept, server, LEV_OPT_CLOSE_ON_FREE, 0, listen_fd);
    return server;
}

static void lev_unserve(void *opaque) {
    lev_server *server = opaque;
    if (server->listener) evconnlistener_free(server->listener);
    for (int i = 0; i < server->count; i++) bufferevent_free(server->accepted[i]);
    free(server->accepted);
    free(server);
}

// MARK: Clients

typedef struct lev_clients lev_clients;

typedef struct {
    lev_clients *set;
    struct bufferevent *bev;
    int remaining;
    double sent_at;
} lev_client;

struct lev_clients {
    raw_sock_run *run;
    struct event_base *base;
    lev_client *clients;
    int count;
};

static void client_send(lev_client *client) {
    raw_sock_run *run = client->set->run;
    if (run->kind == RAW_SOCK_ECHO) {
        client->sent_at = raw_mono_now();
        bufferevent_write(client->bev, run->message_bytes, (size_t)run->message);
        return;
    }
    struct evbuffer *output = bufferevent_get_output(client->bev);
    while (raw_sock_bulk_next(run, (long long)evbuffer_get_length(output))) {
        bufferevent_write(client->bev, run->chunk_bytes, (size_t)run->chunk);
    }
}

static void client_read(struct bufferevent *bev, void *arg) {
    lev_client *client = arg;
    raw_sock_run *run = client->set->run;
    struct evbuffer *input = bufferevent_get_input(bev);
    while (evbuffer_get_length(input) >= (size_t)run->message) {
        evbuffer_drain(input, (size_t)run->message);
        if (raw_sock_echo_reply(run, client->sent_at, &client->remaining)) client_send(client);
    }
}

/// Called once the output buffer has drained to the low watermark.
static void client_write(struct bufferevent *bev, void *arg) {
    (void)bev;
    lev_client *client = arg;
    if (client->set->run->kind == RAW_SOCK_BULK) client_send(client);
}

static void clients_start(lev_clients *set);

static void client_event(struct bufferevent *bev, short what, void *arg) {
    lev_client *client = arg;
    lev_clients *set = client->set;
    if (!(what & BEV_EVENT_CONNECTED)) {
        bufferevent_disable(bev, EV_READ | EV_WRITE);  // the run times out
        return;
    }
    no_delay(bufferevent_getfd(bev));
    int last = raw_sock_connected(set->run);
    if (set->run->kind == RAW_SOCK_IDLE) {
        clients_start(set);
    } else if (last) {
        for (int i = 0; i < set->count; i++) client_send(&set->clients[i]);
    }
}

static void clients_start(lev_clients *set) {
    raw_sock_run *run = set->run;
    while (raw_sock_should_connect(run)) {
        lev_client *client = &set->clients[set->count++];
        client->set = set;
        client->remaining = run->round_trips;
        client->bev = bufferevent_socket_new(set->base, -1, BEV_OPT_CLOSE_ON_FREE);
        bufferevent_set_max_single_write(client->bev, 256 * 1024);
        bufferevent_setcb(client->bev, client_read, client_write, client_event, client);
        if (run->kind == RAW_SOCK_BULK) bufferevent_setwatermark(client->bev, EV_WRITE, (size_t)run->low_watermark, 0);
        bufferevent_enable(client->bev, EV_READ);
        bufferevent_socket_connect(client->bev, (struct sockaddr *)&run->address, sizeof run->address);
    }
}

static void *lev_open_clients(void *loop, raw_sock_run *run) {
    lev_clients *set = calloc(1, sizeof *set);
    if (!set) abort();
    set->run = run;
    set->base = lev_loop_base(loop);
    set->clients = calloc((size_t)run->connections, sizeof *set->clients);
    if (!set->clients) abort();
    clients_start(set);
    return set;
}

static void lev_close_clients(void *opaque) {
    lev_clients *set = opaque;
    for (int i = 0; i < set->count; i++) bufferevent_free(set->clients[i].bev);
    free(set->clients);
    free(set);
}

const raw_socket_ops lev_socket_ops = {lev_serve, lev_unserve, lev_open_clients, lev_close_clients};
