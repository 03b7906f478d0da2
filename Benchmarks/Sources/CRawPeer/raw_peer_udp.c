// See include/raw_peer_udp.h.
#include "raw_peer_udp.h"

#include <string.h>

#define ACK_EVERY 64

void raw_udp_prepare(raw_udp_side *client, raw_udp_side *server, int echo, long long target, int message,
                     int window) {
    memset(client, 0, sizeof *client);
    memset(server, 0, sizeof *server);
    server->is_server = 1;
    client->echo = server->echo = echo;
    client->target = server->target = target;
    client->window = window;
    client->message = message < (int)sizeof client->bytes ? message : (int)sizeof client->bytes;
    memset(client->bytes, 'm', sizeof client->bytes);
}

int raw_udp_received(raw_udp_side *side, const void *bytes, size_t length) {
    if (side->echo) {
        if (side->is_server) return length == 1 ? RAW_UDP_STOP : RAW_UDP_REPLY;
        if (++side->count < side->target) return RAW_UDP_SEND;
        side->end = raw_mono_now();
        return RAW_UDP_SEND_STOP | RAW_UDP_STOP;
    }
    if (side->is_server) {
        int actions = 0;
        side->count++;
        if (side->count % ACK_EVERY == 0 || side->count == side->target) {
            side->ack = side->count;
            actions |= RAW_UDP_ACK;
        }
        if (side->count == side->target) {
            side->end = raw_mono_now();
            actions |= RAW_UDP_STOP;
        }
        return actions;
    }
    if (length == sizeof(long long)) {
        long long acked;
        memcpy(&acked, bytes, sizeof acked);
        if (acked > side->acked) side->acked = acked;
    }
    return side->acked == side->target ? RAW_UDP_STOP : RAW_UDP_FILL;
}

int raw_udp_may_send(raw_udp_side *side) {
    if (side->count >= side->target || side->count - side->acked >= side->window) return 0;
    side->count++;
    return 1;
}

raw_sock_result raw_udp_result(const raw_udp_side *client, const raw_udp_side *server) {
    raw_sock_result result = {0};
    const raw_udp_side *counter = client->echo ? client : server;
    result.count = counter->count;
    result.ok = !client->timed_out && !client->failed && !server->timed_out && !server->failed &&
                result.count == client->target;
    result.seconds = counter->end - client->start;
    if (!result.ok) result.failure = client->timed_out || server->timed_out ? "timed out" : "send failed";
    return result;
}
