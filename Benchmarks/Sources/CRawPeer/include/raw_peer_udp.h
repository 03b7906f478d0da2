#ifndef RAW_PEER_UDP_H
#define RAW_PEER_UDP_H

// The datagram workloads' protocol, shared by the C peers (raw_libuv_udp.c, raw_libevent_udp.c):
// what a side does with each datagram it receives, the flood's window, and the run's outcome. The
// peer itself does only the I/O, in its own idiom.
//
// Echo: the client sends a message, the server sends each datagram back to its sender, the client
// sends the next once the reply is in; a 1-byte datagram tells the server to stop. Flood: the
// sender keeps at most `window` datagrams unacknowledged; the receiver acknowledges every 64th
// (and the last) with its count so far, in an 8-byte datagram.

#include <stddef.h>

#include "raw_peer_sockets.h"

#ifdef __cplusplus
extern "C" {
#endif

/// One side of a run; touched by its loop's thread only.
typedef struct {
    int is_server;    ///< echo server or flood receiver
    int echo;         ///< 1: echo, 0: flood
    long long target; ///< round trips, or datagrams
    long long count;  ///< round trips done, datagrams sent (flood sender) or received (receiver)
    long long acked;  ///< flood sender: the receiver's count
    long long ack;    ///< flood receiver: the count to send back (with RAW_UDP_ACK)
    int window;
    int message;
    char bytes[256];  ///< the message
    int timed_out, failed;
    double start, end;
} raw_udp_side;

/// What a side does after a datagram (bits).
enum {
    RAW_UDP_REPLY = 1,     ///< send the datagram back to its sender
    RAW_UDP_SEND = 2,      ///< send the message to the peer
    RAW_UDP_ACK = 4,       ///< send `ack` (8 bytes) back to the sender
    RAW_UDP_FILL = 8,      ///< send while `raw_udp_may_send` says so
    RAW_UDP_SEND_STOP = 16, ///< send the 1-byte stop datagram to the peer
    RAW_UDP_STOP = 32,     ///< stop this side's loop
};

/// Sets up both sides of a run.
void raw_udp_prepare(raw_udp_side *client, raw_udp_side *server, int echo, long long target, int message,
                     int window);
/// A datagram of `length` bytes at `bytes` arrived: what to do (RAW_UDP_* bits).
int raw_udp_received(raw_udp_side *side, const void *bytes, size_t length);
/// Flood sender: 1 if another datagram may be sent now (counted), 0 if the window is full or all
/// were sent.
int raw_udp_may_send(raw_udp_side *side);
/// The run's outcome, once both sides stopped.
raw_sock_result raw_udp_result(const raw_udp_side *client, const raw_udp_side *server);

#ifdef __cplusplus
}
#endif

#endif
