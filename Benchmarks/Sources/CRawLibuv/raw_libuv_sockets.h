#ifndef RAW_LIBUV_SOCKETS_H
#define RAW_LIBUV_SOCKETS_H

// Between the files of the libuv peer: the socket workloads (raw_libuv_sockets.c), which
// raw_libuv.c puts in the peer's table.

struct raw_socket_ops;

/// The server I/O workloads on uv_tcp_t streams (raw_libuv_sockets.c).
extern const struct raw_socket_ops uvs_socket_ops;

#endif
