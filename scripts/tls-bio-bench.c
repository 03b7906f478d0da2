// OpenSSL on the socket itself (SSL_set_fd) against OpenSSL over memory: OpenSSL's memory BIOs
// (`bio`), or a BIO over libevent's evbuffers (`evbuffer`: what RunLoopKit's TLS engine does,
// readv into one buffer, writev from the other). The program moves the ciphertext between the
// socket and the memory. `recv`: the evbuffer BIO for writing, and for reading a BIO whose read
// is a `recv` from the socket straight into OpenSSL's record buffer (read-ahead on, so one `recv`
// fills it); `send`: that read BIO, and a write BIO that `send`s each record at once. One-way
// bulk throughput over a loopback TCP connection, TLS 1.3, AES-256-GCM, 16 KiB writes, a writer
// and a reader thread. Run by scripts/tls-bio-bench.sh.
//
//   tls-bio-bench fd|bio|evbuffer|recv|send CERT KEY MEBIBYTES   prints the mode and GB/s
#include <arpa/inet.h>
#include <event2/buffer.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { CHUNK = 16 * 1024, READ_SIZE = 64 * 1024 };

enum Mode { SOCKET, MEMORY, EVBUFFER, RECV, SEND };
static enum Mode mode;
static BIO_METHOD *evbuffer_method, *socket_method;
static size_t total;
static SSL_CTX *server_context, *client_context;

static void fail(const char *what) {
    fprintf(stderr, "tls-bio-bench: %s\n", what);
    ERR_print_errors_fp(stderr);
    exit(1);
}

// A BIO over an evbuffer: reads take from its front, writes append.
static int evbuffer_bio_read(BIO *bio, char *data, int length) {
    BIO_clear_retry_flags(bio);
    int count = evbuffer_remove(BIO_get_data(bio), data, (size_t)length);
    if (count > 0) return count;
    BIO_set_retry_read(bio);
    return -1;
}

static int evbuffer_bio_write(BIO *bio, const char *data, int length) {
    BIO_clear_retry_flags(bio);
    return evbuffer_add(BIO_get_data(bio), data, (size_t)length) == 0 ? length : -1;
}

static long evbuffer_bio_ctrl(BIO *bio, int command, long number, void *pointer) {
    (void)number;
    (void)pointer;
    if (command == BIO_CTRL_FLUSH) return 1;
    if (command == BIO_CTRL_PENDING) return (long)evbuffer_get_length(BIO_get_data(bio));
    return 0;
}

// A BIO over the socket: reads are `recv`s into OpenSSL's buffer, writes `send`s of its records.
static int socket_bio_read(BIO *bio, char *data, int length) {
    BIO_clear_retry_flags(bio);
    ssize_t count = recv((int)(long)BIO_get_data(bio), data, (size_t)length, MSG_DONTWAIT);
    if (count > 0) return (int)count;
    if (count < 0 && errno == EAGAIN) BIO_set_retry_read(bio);
    return -1;
}

static int socket_bio_write(BIO *bio, const char *data, int length) {
    BIO_clear_retry_flags(bio);
    for (int sent = 0; sent < length;) {
        ssize_t count = send((int)(long)BIO_get_data(bio), data + sent, (size_t)(length - sent), MSG_NOSIGNAL);
        if (count <= 0) return -1;
        sent += (int)count;
    }
    return length;
}

static long socket_bio_ctrl(BIO *bio, int command, long number, void *pointer) {
    (void)bio;
    (void)number;
    (void)pointer;
    return command == BIO_CTRL_FLUSH;
}

static BIO *socket_bio(int fd) {
    BIO *bio = BIO_new(socket_method);
    BIO_set_data(bio, (void *)(long)fd);
    BIO_set_init(bio, 1);
    return bio;
}

static BIO *evbuffer_bio(void) {
    BIO *bio = BIO_new(evbuffer_method);
    BIO_set_data(bio, evbuffer_new());
    BIO_set_init(bio, 1);
    return bio;
}

// Memory: what OpenSSL wrote goes to the socket.
static void flush_out(SSL *ssl, int fd) {
    BIO *out = SSL_get_wbio(ssl);
    if (mode == SEND) return;
    if (mode == EVBUFFER || mode == RECV) {
        struct evbuffer *buffer = BIO_get_data(out);
        while (evbuffer_get_length(buffer) > 0) {
            if (evbuffer_write(buffer, fd) <= 0) fail("writev");
        }
        return;
    }
    char buffer[READ_SIZE];
    int count;
    while ((count = BIO_read(out, buffer, sizeof buffer)) > 0) {
        for (int sent = 0; sent < count;) {
            ssize_t written = write(fd, buffer + sent, (size_t)(count - sent));
            if (written <= 0) fail("write");
            sent += (int)written;
        }
    }
}

// Memory: what the socket has goes to OpenSSL; 0 at its end.
static int fill_in(SSL *ssl, int fd) {
    if (mode == RECV || mode == SEND) {
        // The read BIO reads the socket itself: wait until it has bytes, as a loop would.
        struct pollfd readable = {.fd = fd, .events = POLLIN};
        return poll(&readable, 1, -1) == 1;
    }
    if (mode == EVBUFFER) return evbuffer_read(BIO_get_data(SSL_get_rbio(ssl)), fd, READ_SIZE) > 0;
    char buffer[READ_SIZE];
    ssize_t count = read(fd, buffer, sizeof buffer);
    if (count <= 0) return 0;
    if (BIO_write(SSL_get_rbio(ssl), buffer, (int)count) != count) fail("BIO_write");
    return 1;
}

static SSL *start(SSL_CTX *context, int fd, int server) {
    SSL *ssl = SSL_new(context);
    if (mode == MEMORY) {
        SSL_set_bio(ssl, BIO_new(BIO_s_mem()), BIO_new(BIO_s_mem()));
    } else if (mode == EVBUFFER) {
        SSL_set_bio(ssl, evbuffer_bio(), evbuffer_bio());
    } else if (mode == RECV) {
        SSL_set_read_ahead(ssl, 1);
        SSL_set_bio(ssl, socket_bio(fd), evbuffer_bio());
    } else if (mode == SEND) {
        SSL_set_read_ahead(ssl, 1);
        SSL_set_bio(ssl, socket_bio(fd), socket_bio(fd));
    } else {
        SSL_set_fd(ssl, fd);
    }
    if (server) SSL_set_accept_state(ssl); else SSL_set_connect_state(ssl);
    for (;;) {
        int result = SSL_do_handshake(ssl);
        if (mode != SOCKET) flush_out(ssl, fd);
        if (result == 1) return ssl;
        if (mode == SOCKET || SSL_get_error(ssl, result) != SSL_ERROR_WANT_READ) fail("handshake");
        if (!fill_in(ssl, fd)) fail("end of stream in the handshake");
    }
}

static void *writer(void *argument) {
    int fd = *(int *)argument;
    SSL *ssl = start(client_context, fd, 0);
    static char chunk[CHUNK];
    memset(chunk, 'x', sizeof chunk);
    for (size_t sent = 0; sent < total; sent += CHUNK) {
        if (SSL_write(ssl, chunk, CHUNK) != CHUNK) fail("SSL_write");
        if (mode != SOCKET) flush_out(ssl, fd);
    }
    SSL_free(ssl);
    return NULL;
}

static double now(void) {
    struct timespec time;
    clock_gettime(CLOCK_MONOTONIC, &time);
    return (double)time.tv_sec + (double)time.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 5) fail("usage: tls-bio-bench fd|bio|evbuffer|recv|send CERT KEY MEBIBYTES");
    mode = strcmp(argv[1], "bio") == 0        ? MEMORY
           : strcmp(argv[1], "evbuffer") == 0 ? EVBUFFER
           : strcmp(argv[1], "recv") == 0     ? RECV
           : strcmp(argv[1], "send") == 0     ? SEND
                                              : SOCKET;
    evbuffer_method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "evbuffer");
    BIO_meth_set_read(evbuffer_method, evbuffer_bio_read);
    BIO_meth_set_write(evbuffer_method, evbuffer_bio_write);
    BIO_meth_set_ctrl(evbuffer_method, evbuffer_bio_ctrl);
    socket_method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "socket");
    BIO_meth_set_read(socket_method, socket_bio_read);
    BIO_meth_set_write(socket_method, socket_bio_write);
    BIO_meth_set_ctrl(socket_method, socket_bio_ctrl);
    total = (size_t)atol(argv[4]) << 20;
    server_context = SSL_CTX_new(TLS_server_method());
    client_context = SSL_CTX_new(TLS_client_method());
    if (SSL_CTX_use_certificate_chain_file(server_context, argv[2]) != 1 ||
        SSL_CTX_use_PrivateKey_file(server_context, argv[3], SSL_FILETYPE_PEM) != 1)
        fail("certificate");
    SSL_CTX_set_ciphersuites(server_context, "TLS_AES_256_GCM_SHA384");

    int listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t length = sizeof address;
    if (bind(listener, (struct sockaddr *)&address, length) != 0 || listen(listener, 1) != 0) fail("listen");
    getsockname(listener, (struct sockaddr *)&address, &length);
    int client = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(client, (struct sockaddr *)&address, length) != 0) fail("connect");
    int server = accept(listener, NULL, NULL);
    int one = 1;
    setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);

    double began = now();
    pthread_t thread;
    pthread_create(&thread, NULL, writer, &client);
    SSL *ssl = start(server_context, server, 1);
    static char buffer[READ_SIZE];
    size_t received = 0;
    while (received < total) {
        int count = SSL_read(ssl, buffer, sizeof buffer);
        if (count > 0) {
            received += (size_t)count;
        } else if (mode == SOCKET || SSL_get_error(ssl, count) != SSL_ERROR_WANT_READ || !fill_in(ssl, server)) {
            fail("SSL_read");
        }
    }
    double seconds = now() - began;
    pthread_join(thread, NULL);
    printf("%s %.3f GB/s\n", argv[1], (double)total / seconds / 1e9);
    return 0;
}
