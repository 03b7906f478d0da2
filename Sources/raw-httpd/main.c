// raw-httpd: the HTTP/1.1 server of runloop-httpd written directly on libevent 2.1, in C.
//
// It exists only to measure runloop-httpd against: same responses (byte for byte, Date included),
// same request parsing rules, same threading (N pthreads, each with its own event_base and its own
// SO_REUSEPORT listener), same keep-alive, pipelining, idle timeout, connection limit, lingering
// close and SIGINT/SIGTERM draining. See Sources/runloop-httpd/README.md.

#define _GNU_SOURCE  // accept4, CLOCK_*_COARSE

#include <sys/types.h>
#include <sys/time.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/eventfd.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#define IN_CAPACITY 16384
#define OUT_INITIAL 4096
#define MAX_HEAD 8192
#define ACCEPT_BATCH 64
#define LINGER_SECONDS 2.0
#define DRAIN_GRACE_SECONDS 10.0

// MARK: Configuration

static struct {
    const char *host;
    int port;
    int threads;
    double idle_timeout;
    long max_connections;
} config = {"127.0.0.1", 8080, 0, 30.0, 10000};

static atomic_long open_connections;

// MARK: Parser (the rules of HTTPCore's HTTPRequestParser)

enum { METHOD_GET, METHOD_HEAD, METHOD_UNSUPPORTED };
enum { PARSE_INCOMPLETE, PARSE_REQUEST, PARSE_ERROR };

typedef struct {
    int scanned, line_start, request_start;
} parser_t;

typedef struct {
    int method;
    int http11;
    int target_start, target_end;
    int keep_alive;
    long content_length;
    int has_transfer_encoding;
    int length;
} head_t;

static inline void parser_reset(parser_t *p) {
    p->scanned = 0;
    p->line_start = 0;
    p->request_start = -1;
}

static inline int is_token(uint8_t c) {
    if ((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')) return 1;
    switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+':
    case '-': case '.': case '^': case '_': case '`': case '|': case '~':
        return 1;
    default:
        return 0;
    }
}

static inline int is_ws(uint8_t c) { return c == ' ' || c == '\t'; }
static inline int is_digit(uint8_t c) { return (uint8_t)(c - '0') < 10; }

static inline const uint8_t *find_lf(const uint8_t *b, int from, int to) {
    return from < to ? memchr(b + from, '\n', (size_t)(to - from)) : NULL;
}

static inline int trim_cr(const uint8_t *b, int start, int lf) {
    return (lf > start && b[lf - 1] == '\r') ? lf - 1 : lf;
}

static int equals_nocase(const uint8_t *b, int offset, const char *lower, int n) {
    for (int k = 0; k < n; k++) {
        uint8_t c = b[offset + k];
        if ((uint8_t)(c - 'A') < 26) c |= 0x20;
        if (c != (uint8_t)lower[k]) return 0;
    }
    return 1;
}

static int parse_head(const uint8_t *b, int start, int end, head_t *h, int *status) {
    *status = 400;
    const uint8_t *lfp = find_lf(b, start, end);
    if (!lfp) return PARSE_ERROR;
    int request_lf = (int)(lfp - b);
    int line_end = trim_cr(b, start, request_lf);
    int i = start;
    while (i < line_end && is_token(b[i])) i++;
    if (i == start || i >= line_end || b[i] != ' ') return PARSE_ERROR;
    if (i - start == 3 && memcmp(b + start, "GET", 3) == 0) h->method = METHOD_GET;
    else if (i - start == 4 && memcmp(b + start, "HEAD", 4) == 0) h->method = METHOD_HEAD;
    else h->method = METHOD_UNSUPPORTED;
    i++;
    int target_start = i;
    while (i < line_end && b[i] > 0x20 && b[i] != 0x7F) i++;
    if (i == target_start || i >= line_end || b[i] != ' ') return PARSE_ERROR;
    h->target_start = target_start;
    h->target_end = i;
    i++;
    if (line_end - i != 8 || memcmp(b + i, "HTTP/", 5) != 0 || !is_digit(b[i + 5]) || b[i + 6] != '.' ||
        !is_digit(b[i + 7]))
        return PARSE_ERROR;
    if (b[i + 5] != '1') {
        *status = 505;
        return PARSE_ERROR;
    }
    h->http11 = b[i + 7] != '0';

    int host_count = 0, close = 0, keep_alive = 0, has_te = 0;
    long content_length = -1;
    int line_start = request_lf + 1;
    for (;;) {
        lfp = find_lf(b, line_start, end);
        if (!lfp) return PARSE_ERROR;
        int lf = (int)(lfp - b);
        int le = trim_cr(b, line_start, lf);
        if (le == line_start) break;
        int c = line_start;
        while (c < le && is_token(b[c])) c++;
        if (c == line_start || c >= le || b[c] != ':') return PARSE_ERROR;
        int name_len = c - line_start;
        c++;
        while (c < le && is_ws(b[c])) c++;
        int ve = le;
        while (ve > c && is_ws(b[ve - 1])) ve--;
        int vs = c;
        for (int k = vs; k < ve; k++) {
            uint8_t v = b[k];
            if ((v < 0x20 && v != '\t') || v == 0x7F) return PARSE_ERROR;
        }
        switch (name_len) {
        case 4:
            if (equals_nocase(b, line_start, "host", 4)) host_count++;
            break;
        case 10:
            if (equals_nocase(b, line_start, "connection", 10)) {
                int k = vs;
                while (k < ve) {
                    int oe = k;
                    while (oe < ve && b[oe] != ',') oe++;
                    int a = k, z = oe;
                    while (a < z && is_ws(b[a])) a++;
                    while (z > a && is_ws(b[z - 1])) z--;
                    if (z - a == 5 && equals_nocase(b, a, "close", 5)) close = 1;
                    if (z - a == 10 && equals_nocase(b, a, "keep-alive", 10)) keep_alive = 1;
                    k = oe + 1;
                }
            }
            break;
        case 14:
            if (equals_nocase(b, line_start, "content-length", 14)) {
                if (ve == vs || ve - vs > 18) return PARSE_ERROR;
                long value = 0;
                for (int k = vs; k < ve; k++) {
                    if (!is_digit(b[k])) return PARSE_ERROR;
                    value = value * 10 + (b[k] - '0');
                }
                if (content_length >= 0 && content_length != value) return PARSE_ERROR;
                content_length = value;
            }
            break;
        case 17:
            if (equals_nocase(b, line_start, "transfer-encoding", 17)) has_te = 1;
            break;
        default:
            break;
        }
        line_start = lf + 1;
    }
    if (h->http11 ? host_count != 1 : host_count > 1) return PARSE_ERROR;
    if (has_te && (!h->http11 || content_length >= 0)) return PARSE_ERROR;
    h->keep_alive = h->http11 ? !close : (keep_alive && !close);
    if (has_te) h->keep_alive = 0;
    h->content_length = content_length < 0 ? 0 : content_length;
    h->has_transfer_encoding = has_te;
    h->length = end;
    return PARSE_REQUEST;
}

static int parse(parser_t *p, const uint8_t *b, int count, head_t *h, int *status) {
    if (count <= 0) return PARSE_INCOMPLETE;
    if (p->scanned > count) parser_reset(p);
    int search_end = count < MAX_HEAD ? count : MAX_HEAD;
    int position = p->scanned;
    const uint8_t *lfp;
    while ((lfp = find_lf(b, position, search_end)) != NULL) {
        int lf = (int)(lfp - b);
        int line_end = lf;
        if (line_end > p->line_start && b[line_end - 1] == '\r') line_end--;
        position = lf + 1;
        if (line_end == p->line_start) {
            if (p->request_start < 0) {
                p->line_start = position;
                continue;
            }
            int start = p->request_start;
            parser_reset(p);
            return parse_head(b, start, position, h, status);
        }
        if (p->request_start < 0) p->request_start = p->line_start;
        p->line_start = position;
    }
    if (count >= MAX_HEAD) {
        parser_reset(p);
        *status = 431;
        return PARSE_ERROR;
    }
    p->scanned = count;
    return PARSE_INCOMPLETE;
}

// MARK: Responses (the bytes of HTTPCore's HTTPResponseTable)

enum { KIND_HELLO, KIND_HEALTH, KIND_NOT_FOUND, KIND_NOT_ALLOWED, KIND_BAD_REQUEST, KIND_TOO_LARGE,
       KIND_VERSION, KIND_COUNT };

static const struct {
    int status;
    const char *reason;
    const char *body;
} kinds[KIND_COUNT] = {
    {200, "OK", "Hello, World!"},
    {200, "OK", "OK"},
    {404, "Not Found", "Not Found"},
    {405, "Method Not Allowed", "Method Not Allowed"},
    {400, "Bad Request", "Bad Request"},
    {431, "Request Header Fields Too Large", "Request Header Fields Too Large"},
    {505, "HTTP Version Not Supported", "HTTP Version Not Supported"},
};

#define VARIANTS (KIND_COUNT * 4)

typedef struct {
    char storage[VARIANTS * 256];
    int offset[VARIANTS], length[VARIANTS], date_offset[VARIANTS];
    time_t date_seconds;
} responses_t;

static void format_date(time_t seconds, char out[30]) {
    struct tm tm;
    gmtime_r(&seconds, &tm);
    strftime(out, 30, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

static void responses_update_date(responses_t *r, time_t seconds) {
    if (seconds == r->date_seconds) return;
    r->date_seconds = seconds;
    char date[30];
    format_date(seconds, date);
    for (int v = 0; v < VARIANTS; v++) memcpy(r->storage + r->date_offset[v], date, 29);
}

static void responses_init(responses_t *r) {
    int used = 0;
    for (int k = 0; k < KIND_COUNT; k++) {
        for (int keep = 1; keep >= 0; keep--) {
            for (int head_only = 0; head_only <= 1; head_only++) {
                int v = k * 4 + (keep ? 0 : 2) + head_only;
                char *out = r->storage + used;
                int n = sprintf(out, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\nDate: ",
                                kinds[k].status, kinds[k].reason, strlen(kinds[k].body));
                r->date_offset[v] = used + n;
                n += sprintf(out + n, "%29s\r\nConnection: %s\r\n%s\r\n%s", "", keep ? "keep-alive" : "close",
                             k == KIND_NOT_ALLOWED ? "Allow: GET, HEAD\r\n" : "", head_only ? "" : kinds[k].body);
                r->offset[v] = used;
                r->length[v] = n;
                used += n;
            }
        }
    }
    r->date_seconds = -1;
    responses_update_date(r, time(NULL));
}

static inline int route(const head_t *h, const uint8_t *b) {
    if (h->method == METHOD_UNSUPPORTED) return KIND_NOT_ALLOWED;
    int start = h->target_start, end = start;
    while (end < h->target_end && b[end] != '?') end++;
    if (end - start == 1 && b[start] == '/') return KIND_HELLO;
    if (end - start == 7 && memcmp(b + start, "/health", 7) == 0) return KIND_HEALTH;
    return KIND_NOT_FOUND;
}

// MARK: Connections

typedef struct worker worker_t;

typedef struct conn {
    worker_t *worker;
    int fd;
    struct event *read_event, *write_event, *timer;
    short events;  // EV_READ and/or EV_WRITE currently added
    uint8_t *in;
    int in_start, in_end;
    uint8_t *out;
    int out_start, out_end, out_capacity;
    parser_t parser;
    long body_remaining;
    int close_after;  // close once the output is written
    int lingering;    // output done, write side shut down, discarding input until EOF
    int peer_closed;
    struct timespec last_activity;
    struct conn *prev, *next;
} conn_t;

struct worker {
    int index;
    struct event_base *base;
    int listen_fd;
    struct event *listen_event;
    int control_fd;
    struct event *control_event;
    struct event *grace_timer;
    int spare_fd;
    int draining;
    time_t date_checked_second;
    long connections;
    conn_t *list;
    responses_t responses;
    pthread_t thread;
};

static inline void now_coarse(struct timespec *ts) { clock_gettime(CLOCK_MONOTONIC_COARSE, ts); }

static inline double seconds_since(const struct timespec *then) {
    struct timespec now;
    now_coarse(&now);
    return (double)(now.tv_sec - then->tv_sec) + (double)(now.tv_nsec - then->tv_nsec) / 1e9;
}

static struct timeval timeval_of(double seconds) {
    if (seconds < 0) seconds = 0;
    struct timeval tv = {(time_t)seconds, (suseconds_t)((seconds - (double)(time_t)seconds) * 1e6)};
    return tv;
}

static void conn_close(conn_t *c) {
    worker_t *w = c->worker;
    event_free(c->read_event);
    event_free(c->write_event);
    event_free(c->timer);
    close(c->fd);
    free(c->in);
    free(c->out);
    if (c->prev) c->prev->next = c->next; else w->list = c->next;
    if (c->next) c->next->prev = c->prev;
    free(c);
    w->connections--;
    atomic_fetch_sub_explicit(&open_connections, 1, memory_order_relaxed);
    if (w->draining && w->connections == 0) event_base_loopbreak(w->base);
}

static void set_events(conn_t *c, short wanted) {
    if (c->events == wanted) return;
    if ((wanted & EV_READ) && !(c->events & EV_READ)) event_add(c->read_event, NULL);
    if (!(wanted & EV_READ) && (c->events & EV_READ)) event_del(c->read_event);
    if ((wanted & EV_WRITE) && !(c->events & EV_WRITE)) event_add(c->write_event, NULL);
    if (!(wanted & EV_WRITE) && (c->events & EV_WRITE)) event_del(c->write_event);
    c->events = wanted;
}

static inline void out_append(conn_t *c, const char *bytes, int n) {
    if (c->out_capacity - c->out_end < n) {
        if (c->out_start > 0) {
            memmove(c->out, c->out + c->out_start, (size_t)(c->out_end - c->out_start));
            c->out_end -= c->out_start;
            c->out_start = 0;
        }
        while (c->out_capacity - c->out_end < n) c->out_capacity *= 2;
        c->out = realloc(c->out, (size_t)c->out_capacity);
        if (!c->out) abort();
    }
    memcpy(c->out + c->out_end, bytes, (size_t)n);
    c->out_end += n;
}

static inline void respond(conn_t *c, int kind, int keep_alive, int head_only) {
    responses_t *r = &c->worker->responses;
    int v = kind * 4 + (keep_alive ? 0 : 2) + head_only;
    out_append(c, r->storage + r->offset[v], r->length[v]);
}

// Parses every complete request in the input and queues one response per request.
static void process(conn_t *c) {
    int allow_keep_alive = !c->worker->draining;
    while (c->in_start < c->in_end) {
        if (c->body_remaining > 0) {
            long skip = c->in_end - c->in_start;
            if (skip > c->body_remaining) skip = c->body_remaining;
            c->in_start += (int)skip;
            c->body_remaining -= skip;
            continue;
        }
        const uint8_t *rest = c->in + c->in_start;
        head_t h;
        int status;
        switch (parse(&c->parser, rest, c->in_end - c->in_start, &h, &status)) {
        case PARSE_INCOMPLETE:
            goto done;
        case PARSE_ERROR:
            respond(c, status == 431 ? KIND_TOO_LARGE : status == 505 ? KIND_VERSION : KIND_BAD_REQUEST, 0, 0);
            c->close_after = 1;
            c->in_start = c->in_end = 0;
            return;
        default: {
            int keep = h.keep_alive && allow_keep_alive;
            respond(c, route(&h, rest), keep, h.method == METHOD_HEAD);
            if (!keep) {
                c->close_after = 1;
                c->in_start = c->in_end = 0;
                return;
            }
            c->in_start += h.length;
            c->body_remaining = h.content_length;
        }
        }
    }
done:
    if (c->in_start == c->in_end) {
        c->in_start = c->in_end = 0;
    } else if (c->in_start > 0) {
        memmove(c->in, c->in + c->in_start, (size_t)(c->in_end - c->in_start));
        c->in_end -= c->in_start;
        c->in_start = 0;
    }
}

static void start_lingering(conn_t *c) {
    shutdown(c->fd, SHUT_WR);
    c->lingering = 1;
    set_events(c, EV_READ);
    struct timeval tv = timeval_of(LINGER_SECONDS < config.idle_timeout ? LINGER_SECONDS : config.idle_timeout);
    evtimer_add(c->timer, &tv);
}

// Writes the queued output with one send; returns 0 if the connection was closed.
static int flush(conn_t *c) {
    if (c->out_end > c->out_start) {
        ssize_t n = send(c->fd, c->out + c->out_start, (size_t)(c->out_end - c->out_start), MSG_NOSIGNAL);
        if (n > 0) {
            c->out_start += (int)n;
            if (c->out_start == c->out_end) c->out_start = c->out_end = 0;
        } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
            conn_close(c);
            return 0;
        }
    }
    if (c->out_end > c->out_start) {
        set_events(c, EV_WRITE);  // stop reading until the client takes its responses
        return 1;
    }
    if (c->close_after) {
        start_lingering(c);
    } else if (c->peer_closed) {
        conn_close(c);
        return 0;
    } else {
        set_events(c, EV_READ);
    }
    return 1;
}

static void on_readable(evutil_socket_t fd, short what, void *arg) {
    (void)what;
    conn_t *c = arg;
    if (c->lingering) {
        char discard[4096];
        ssize_t n = recv(fd, discard, sizeof discard, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) conn_close(c);
        return;
    }
    ssize_t n = recv(fd, c->in + c->in_end, (size_t)(IN_CAPACITY - c->in_end), 0);
    if (n > 0) {
        c->in_end += (int)n;
        // One clock read per batch; the wall clock (for Date) only when the second changes.
        now_coarse(&c->last_activity);
        if (c->last_activity.tv_sec != c->worker->date_checked_second) {
            c->worker->date_checked_second = c->last_activity.tv_sec;
            struct timespec wall;
            clock_gettime(CLOCK_REALTIME_COARSE, &wall);
            responses_update_date(&c->worker->responses, wall.tv_sec);
        }
        process(c);
        flush(c);
    } else if (n == 0) {
        c->peer_closed = 1;
        if (c->out_end > c->out_start) {
            set_events(c, EV_WRITE);
        } else {
            conn_close(c);
        }
    } else if (errno != EAGAIN && errno != EINTR) {
        conn_close(c);
    }
}

static void on_writable(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    conn_t *c = arg;
    now_coarse(&c->last_activity);
    flush(c);
}

// The idle timer: re-armed lazily, so that traffic costs no timer operations.
static void on_idle_timer(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    conn_t *c = arg;
    if (c->lingering) {
        conn_close(c);
        return;
    }
    double idle = seconds_since(&c->last_activity);
    if (idle >= config.idle_timeout) {
        conn_close(c);
        return;
    }
    struct timeval tv = timeval_of(config.idle_timeout - idle);
    evtimer_add(c->timer, &tv);
}

static void conn_open(worker_t *w, int fd) {
    conn_t *c = calloc(1, sizeof *c);
    if (!c) abort();
    c->worker = w;
    c->fd = fd;
    c->in = malloc(IN_CAPACITY);
    c->out_capacity = OUT_INITIAL;
    c->out = malloc((size_t)c->out_capacity);
    if (!c->in || !c->out) abort();
    parser_reset(&c->parser);
    c->read_event = event_new(w->base, fd, EV_READ | EV_PERSIST, on_readable, c);
    c->write_event = event_new(w->base, fd, EV_WRITE | EV_PERSIST, on_writable, c);
    c->timer = evtimer_new(w->base, on_idle_timer, c);
    now_coarse(&c->last_activity);
    c->next = w->list;
    if (w->list) w->list->prev = c;
    w->list = c;
    w->connections++;
    set_events(c, EV_READ);
    struct timeval tv = timeval_of(config.idle_timeout);
    evtimer_add(c->timer, &tv);
}

// MARK: Listening

static void on_acceptable(evutil_socket_t fd, short what, void *arg) {
    (void)what;
    worker_t *w = arg;
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        int client = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (client < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if ((errno == EMFILE || errno == ENFILE) && w->spare_fd >= 0) {
                // Out of descriptors: use the spare one to accept and close, so the listener does not spin.
                close(w->spare_fd);
                int dropped = accept(fd, NULL, NULL);
                if (dropped >= 0) close(dropped);
                w->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
            }
            return;
        }
        if (atomic_fetch_add_explicit(&open_connections, 1, memory_order_relaxed) >= config.max_connections) {
            atomic_fetch_sub_explicit(&open_connections, 1, memory_order_relaxed);
            close(client);
            continue;
        }
        int one = 1;
        setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        conn_open(w, client);
    }
}

static int make_listener(const char *host, int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
        fprintf(stderr, "raw-httpd: not an IPv4 address: %s\n", host);
        exit(2);
    }
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(fd, 4096) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

// MARK: Draining (SIGINT/SIGTERM)

static void on_grace_timeout(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    worker_t *w = arg;
    event_base_loopbreak(w->base);
}

static void on_control(evutil_socket_t fd, short what, void *arg) {
    (void)what;
    worker_t *w = arg;
    uint64_t value;
    if (read(fd, &value, sizeof value) < 0) return;
    if (w->draining) return;
    w->draining = 1;
    event_del(w->listen_event);
    close(w->listen_fd);
    // Close connections with nothing in flight; the others finish their response first.
    conn_t *c = w->list;
    while (c) {
        conn_t *next = c->next;
        if (c->in_end == c->in_start && c->out_end == c->out_start && c->body_remaining == 0 && !c->lingering) {
            conn_close(c);
        }
        c = next;
    }
    if (w->connections == 0) {
        event_base_loopbreak(w->base);
        return;
    }
    struct timeval tv = timeval_of(DRAIN_GRACE_SECONDS);
    evtimer_add(w->grace_timer, &tv);
}

static void *worker_main(void *arg) {
    worker_t *w = arg;
    event_base_dispatch(w->base);
    return NULL;
}

// MARK: Main

static void usage(FILE *out) {
    fprintf(out,
            "usage: raw-httpd [--port N] [--threads N] [--idle-timeout SECONDS] [--max-connections N] [--host ADDR]\n");
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *value = NULL;
        char name[64];
        const char *eq = strchr(arg, '=');
        if (eq && (size_t)(eq - arg) < sizeof name) {
            memcpy(name, arg, (size_t)(eq - arg));
            name[eq - arg] = 0;
            value = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", arg);
            if (strcmp(name, "--help") && strcmp(name, "-h")) {
                if (i + 1 >= argc) {
                    usage(stderr);
                    return 2;
                }
                value = argv[++i];
            }
        }
        if (!strcmp(name, "--help") || !strcmp(name, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(name, "--port")) config.port = atoi(value);
        else if (!strcmp(name, "--threads")) config.threads = atoi(value);
        else if (!strcmp(name, "--idle-timeout")) config.idle_timeout = atof(value);
        else if (!strcmp(name, "--max-connections")) config.max_connections = atol(value);
        else if (!strcmp(name, "--host")) config.host = value;
        else {
            usage(stderr);
            return 2;
        }
    }
    if (config.threads <= 0) config.threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (config.threads <= 0) config.threads = 1;
    if (config.port < 0 || config.port > 65535 || config.idle_timeout <= 0 || config.max_connections <= 0) {
        usage(stderr);
        return 2;
    }

    // Signals are handled by the main thread with sigwait: block them before any thread starts.
    signal(SIGPIPE, SIG_IGN);
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);

    worker_t *workers = calloc((size_t)config.threads, sizeof *workers);
    if (!workers) abort();
    int port = config.port;
    for (int i = 0; i < config.threads; i++) {
        worker_t *w = &workers[i];
        w->index = i;
        w->listen_fd = make_listener(config.host, port);
        if (w->listen_fd < 0) {
            fprintf(stderr, "raw-httpd: cannot listen on %s:%d: %s\n", config.host, port, strerror(errno));
            return 1;
        }
        if (port == 0) {
            struct sockaddr_in bound;
            socklen_t length = sizeof bound;
            getsockname(w->listen_fd, (struct sockaddr *)&bound, &length);
            port = ntohs(bound.sin_port);
        }
        struct event_config *cfg = event_config_new();
        event_config_set_flag(cfg, EVENT_BASE_FLAG_NOLOCK);
        w->base = event_base_new_with_config(cfg);
        event_config_free(cfg);
        if (!w->base) {
            fprintf(stderr, "raw-httpd: event_base_new failed\n");
            return 1;
        }
        w->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        responses_init(&w->responses);
        w->listen_event = event_new(w->base, w->listen_fd, EV_READ | EV_PERSIST, on_acceptable, w);
        event_add(w->listen_event, NULL);
        w->control_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        w->control_event = event_new(w->base, w->control_fd, EV_READ | EV_PERSIST, on_control, w);
        event_add(w->control_event, NULL);
        w->grace_timer = evtimer_new(w->base, on_grace_timeout, w);
    }
    for (int i = 0; i < config.threads; i++) {
        if (pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]) != 0) {
            fprintf(stderr, "raw-httpd: pthread_create failed\n");
            return 1;
        }
    }
    printf("listening on %s:%d (%d threads, libevent %s)\n", config.host, port, config.threads,
           event_get_version());
    fflush(stdout);

    int received = 0;
    sigwait(&stop_signals, &received);
    uint64_t one = 1;
    for (int i = 0; i < config.threads; i++) {
        if (write(workers[i].control_fd, &one, sizeof one) < 0) perror("raw-httpd: write");
    }
    for (int i = 0; i < config.threads; i++) pthread_join(workers[i].thread, NULL);
    printf("stopped\n");
    fflush(stdout);
    return 0;
}
