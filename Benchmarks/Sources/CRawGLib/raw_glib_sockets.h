#ifndef RAW_GLIB_SOCKETS_H
#define RAW_GLIB_SOCKETS_H

// Between the files of the GLib peer: the socket workloads (raw_glib_sockets.c), which
// raw_glib.c puts in the peer's table.

struct raw_socket_ops;

/// The server I/O workloads on GUnixFDSources over non-blocking sockets (raw_glib_sockets.c).
extern const struct raw_socket_ops gls_socket_ops;

#endif
