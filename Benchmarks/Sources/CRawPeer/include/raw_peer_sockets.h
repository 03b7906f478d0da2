#ifndef RAW_PEER_SOCKETS_H
#define RAW_PEER_SOCKETS_H

// The server I/O workloads over loopback TCP, shared by the C peers: the driver (two loops, a
// listening socket, the timeouts, the RSS figure) and the bookkeeping, which a peer calls from its
// callbacks; the peer itself does only the I/O, in its own idiom (`raw_socket_ops`). Server and
// clients run on two loop threads of the peer.

#include <netinet/in.h>

#include "raw_peer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    RAW_SOCK_BULK,  ///< one connection: the client writes `bulk_bytes` in chunks, the server drains them
    RAW_SOCK_ECHO,  ///< `connections` clients, each with one message in flight, echoed by the server
    RAW_SOCK_IDLE,  ///< `connections` clients connected, nothing sent
} raw_sock_kind;

/// One run of a socket workload. The counters are each touched by one loop's thread, except
/// `accepted` and `connected`, which are atomic.
typedef struct {
    raw_sock_kind kind;
    struct sockaddr_in address;  ///< the listener's (127.0.0.1, an ephemeral port)
    int connections;
    int window;                 ///< connects in flight at most
    long long bulk_bytes;       ///< bulk: bytes to send
    int chunk;                  ///< bulk: bytes per write
    const char *chunk_bytes;    ///< bulk: what each write sends
    int low_watermark;          ///< bulk: the sender writes again once its queue is at or below this
    int high_watermark;         ///< bulk: ... and stops writing once it reaches this
    int message;                ///< echo: bytes per message
    char message_bytes[256];    ///< echo: the message
    int round_trips;            ///< echo: per connection
    double *rtt_us;             ///< echo with one connection: each round trip (room for round_trips)
    int accepted, connected, started;
    long long received, sent, completed;
    int finished;
    double start, end;
    raw_latch reached;          ///< bulk: all received; echo: all round trips done; idle: all open
} raw_sock_run;

/// What a peer does for the socket workloads, each on the loop's thread it is given.
typedef struct raw_socket_ops {
    /// Accepts on `listen_fd` (listening, non-blocking) and serves `run`'s kind; the server.
    void *(*serve)(void *loop, int listen_fd, raw_sock_run *run);
    /// Closes the listener and every accepted connection, and frees the server.
    void (*unserve)(void *server);
    /// Opens the clients of `run` (`raw_sock_should_connect` says when to start one).
    void *(*open_clients)(void *loop, raw_sock_run *run);
    /// Closes every client connection and frees them.
    void (*close_clients)(void *clients);
} raw_socket_ops;

// MARK: Bookkeeping, for the peers' callbacks

/// Client: 1 if another connect should start now (at most `window` in flight); counts it.
int raw_sock_should_connect(raw_sock_run *run);
/// Client: a connect completed; 1 when it was the last (the clock starts then).
int raw_sock_connected(raw_sock_run *run);
/// Server: a connection was accepted.
void raw_sock_accepted(raw_sock_run *run);
/// Bulk server: `bytes` more arrived.
void raw_sock_received(raw_sock_run *run, long long bytes);
/// Bulk client: 1 if another chunk should be written now, given `queued` bytes in the output
/// queue; counts it.
int raw_sock_bulk_next(raw_sock_run *run, long long queued);
/// Echo client: a reply came back to a message sent at `sent_at` on a connection that has
/// `*remaining` round trips to go; 1 if it should send the next message.
int raw_sock_echo_reply(raw_sock_run *run, double sent_at, int *remaining);

// MARK: The workloads

typedef struct {
    int ok;
    double seconds;
    long long count;  ///< bytes received, round trips completed, or connections opened
    double bytes_per_connection;  ///< idle connections: the RSS growth per connection
    /// With `ok` 0: which step failed (a static string), and `errno` where a system call did.
    const char *failure;
    int error;
} raw_sock_result;

/// `bytes` over one connection in `chunk`-byte writes, the sender respecting the 64 KiB / 256 KiB
/// watermarks of its output queue.
raw_sock_result raw_peer_bulk(const raw_peer *peer, long long bytes, int chunk, double timeout_seconds);
/// `round_trips` of `message`-byte messages on each of `connections` connections; with one
/// connection, each round trip in microseconds to `rtt_us`.
raw_sock_result raw_peer_echo(const raw_peer *peer, int connections, int round_trips, int message, double *rtt_us,
                              double timeout_seconds);
/// Resident bytes per idle open connection (client and server side together) over `connections`
/// connections; `ok` 0 on failure, also when the descriptor limit is too low.
raw_sock_result raw_peer_idle_connections(const raw_peer *peer, int connections, double timeout_seconds);

/// Raises the soft descriptor limit to the hard one; the limit now.
long long raw_raise_descriptor_limit(void);

#ifdef __cplusplus
}
#endif

#endif
