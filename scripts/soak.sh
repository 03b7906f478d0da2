#!/usr/bin/env bash
# Soak test of runloop-httpd: builds it in release, starts it on a free port, loads it with
# `wrk -t2 -c1000 -d60s` while sampling its resident memory every 5 s, then checks that
#   - wrk saw no socket errors (connect, read, write, timeout) and no non-2xx/3xx responses;
#   - the RSS at the end of the load is within 10% of the RSS after the warm-up;
#   - once wrk has finished, the server holds no more sockets than before the load (its
#     listeners), i.e. every connection was closed;
#   - SIGTERM stops the server with exit code 0.
# Prints the figures and exits non-zero when a check fails. `make soak` runs it; `make soak TLS=1`
# (or TLS=1 scripts/soak.sh) does the same over HTTPS, with a certificate made for the run by the
# openssl command line.
#
# Settings (environment variables):
#   DURATION=60       wrk duration, seconds
#   CONNECTIONS=1000  wrk connections
#   WRK_THREADS=2     wrk threads
#   THREADS=<cores>   server threads
#   SAMPLE=5          seconds between RSS samples
#   WARMUP=10         the RSS sample taken this many seconds into the load is the baseline
#   RSS_TOLERANCE=10  percent the final RSS may exceed (or fall below) the baseline
#   TLS=              1: HTTPS (runloop-httpd --tls-cert, --tls-key; wrk over https)
#   SCRATCH_PATH=     swift build --scratch-path (default: the package's .build)
#   SWIFT=swift
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

DURATION=${DURATION:-60}
CONNECTIONS=${CONNECTIONS:-1000}
WRK_THREADS=${WRK_THREADS:-2}
THREADS=${THREADS:-$(nproc)}
SAMPLE=${SAMPLE:-5}
WARMUP=${WARMUP:-10}
RSS_TOLERANCE=${RSS_TOLERANCE:-10}
TLS=${TLS:-}
SWIFT=${SWIFT:-swift}
SCRATCH_FLAGS=()
if [ -n "${SCRATCH_PATH:-}" ]; then SCRATCH_FLAGS=(--scratch-path "$SCRATCH_PATH"); fi

log() { printf 'soak: %s\n' "$*" >&2; }

# --- wrk from Debian/Ubuntu's package when missing ------------------------------------------------

command -v wrk >/dev/null 2>&1 || "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh" wrk

# --- Descriptors: 1000 connections on each side, plus listeners and slack --------------------------

NEED=$((CONNECTIONS + 1024))
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$NEED" ]; then
    HARD=$(ulimit -Hn)
    if [ "$HARD" = unlimited ] || [ "$HARD" -ge "$NEED" ]; then ulimit -n "$NEED"; else ulimit -n "$HARD"; fi
fi
log "open files limit $(ulimit -n)"

# --- Build and start ------------------------------------------------------------------------------

log "building runloop-httpd (release)"
"$SWIFT" build -c release "${SCRATCH_FLAGS[@]}" --product runloop-httpd >&2
BIN=$("$SWIFT" build -c release "${SCRATCH_FLAGS[@]}" --show-bin-path)

WORK=$(mktemp -d /tmp/soak.XXXXXX)
SERVER_PID=
WRK_PID=
cleanup() {
    [ -n "$WRK_PID" ] && kill "$WRK_PID" 2>/dev/null || true
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

SCHEME=http
TLS_FLAGS=()
if [ -n "$TLS" ]; then
    SCHEME=https
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$WORK/key.pem" \
        -out "$WORK/cert.pem" -days 1 -subj "/CN=localhost" 2>/dev/null
    TLS_FLAGS=(--tls-cert "$WORK/cert.pem" --tls-key "$WORK/key.pem")
fi
# Made before the server starts: the background job may open it after the first sed below.
: >"$WORK/server.out"
"$BIN/runloop-httpd" --port 0 --threads "$THREADS" "${TLS_FLAGS[@]}" >"$WORK/server.out" 2>&1 &
SERVER_PID=$!
PORT=
for _ in $(seq 100); do
    PORT=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$WORK/server.out")
    [ -n "$PORT" ] && break
    sleep 0.05
done
if [ -n "$TLS" ]; then
    reply=$(printf 'GET / HTTP/1.1\r\nHost: soak\r\nConnection: close\r\n\r\n' |
        timeout 5 openssl s_client -quiet -connect "127.0.0.1:$PORT" 2>/dev/null || true)
else
    reply=$(timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT
        printf 'GET / HTTP/1.1\r\nHost: soak\r\nConnection: close\r\n\r\n' >&3
        cat <&3" 2>/dev/null || true)
fi
case "$reply" in
    "HTTP/1.1 200 OK"*"Hello, World!") ;;
    *) log "server did not start:"; cat "$WORK/server.out" >&2; exit 1 ;;
esac
log "runloop-httpd pid $SERVER_PID on port $PORT, $THREADS threads"

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$SERVER_PID/status"; }
sockets() { find "/proc/$SERVER_PID/fd" -lname 'socket:*' 2>/dev/null | wc -l; }

sleep 0.5
SOCKETS_BEFORE=$(sockets)
RSS_START=$(rss_kb)

# --- Load, sampling RSS ---------------------------------------------------------------------------

log "wrk -t$WRK_THREADS -c$CONNECTIONS -d${DURATION}s $SCHEME://127.0.0.1:$PORT/"
wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d"${DURATION}s" "$SCHEME://127.0.0.1:$PORT/" >"$WORK/wrk.out" 2>&1 &
WRK_PID=$!
SAMPLES=()
RSS_WARM=
RSS_END=
elapsed=0
while kill -0 "$WRK_PID" 2>/dev/null && [ "$elapsed" -lt "$DURATION" ]; do
    sleep "$SAMPLE"
    elapsed=$((elapsed + SAMPLE))
    kill -0 "$WRK_PID" 2>/dev/null || break
    rss=$(rss_kb)
    SAMPLES+=("${elapsed}s:${rss}")
    log "t=${elapsed}s RSS ${rss} kB, sockets $(sockets)"
    [ "$elapsed" -eq "$WARMUP" ] && RSS_WARM=$rss
    RSS_END=$rss
done
wrk_status=0
wait "$WRK_PID" || wrk_status=$?
WRK_PID=
cat "$WORK/wrk.out"

# --- Checks ---------------------------------------------------------------------------------------

FAILED=0
fail() { log "FAIL: $*"; FAILED=1; }

[ "$wrk_status" -eq 0 ] || fail "wrk exited with $wrk_status"
REQUESTS=$(awk '/requests in/ { print $1 }' "$WORK/wrk.out")
RPS=$(awk '/^Requests\/sec:/ { print $2 }' "$WORK/wrk.out")
SOCKET_ERRORS=$(sed -n 's/^ *Socket errors: *//p' "$WORK/wrk.out")
NON2XX=$(awk '/Non-2xx or 3xx responses:/ { print $NF }' "$WORK/wrk.out")
[ -n "$REQUESTS" ] || fail "no request count in wrk's output"
if [ -n "$SOCKET_ERRORS" ]; then fail "wrk socket errors: $SOCKET_ERRORS"; else SOCKET_ERRORS=none; fi
if [ -n "$NON2XX" ] && [ "$NON2XX" != 0 ]; then fail "$NON2XX non-2xx/3xx responses"; else NON2XX=0; fi

if [ -z "$RSS_WARM" ] || [ -z "$RSS_END" ]; then
    fail "too few RSS samples"
    DRIFT=n/a
else
    DRIFT=$(awk -v a="$RSS_WARM" -v b="$RSS_END" 'BEGIN { printf "%+.1f", (b - a) * 100 / a }')
    awk -v d="$DRIFT" -v t="$RSS_TOLERANCE" 'BEGIN { exit !(d <= t && d >= -t) }' ||
        fail "RSS moved ${DRIFT}% between t=${WARMUP}s and the end (limit ${RSS_TOLERANCE}%)"
fi

# wrk has closed its connections; give the server a moment to see the ends of them.
SOCKETS_AFTER=$(sockets)
for _ in $(seq 50); do
    [ "$SOCKETS_AFTER" -le "$SOCKETS_BEFORE" ] && break
    sleep 0.1
    SOCKETS_AFTER=$(sockets)
done
[ "$SOCKETS_AFTER" -le "$SOCKETS_BEFORE" ] ||
    fail "$SOCKETS_AFTER sockets open after the load, $SOCKETS_BEFORE before (connections left open)"
RSS_AFTER=$(rss_kb)

kill -TERM "$SERVER_PID"
EXIT_CODE=0
for _ in $(seq 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$SERVER_PID" 2>/dev/null; then
    fail "server still running 10 s after SIGTERM"
    kill -KILL "$SERVER_PID" 2>/dev/null || true
fi
wait "$SERVER_PID" || EXIT_CODE=$?
SERVER_PID=
[ "$EXIT_CODE" -eq 0 ] || fail "server exited with $EXIT_CODE after SIGTERM"

# --- Figures --------------------------------------------------------------------------------------

cat <<SUMMARY
soak summary
  machine:        $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), Linux $(uname -r)
  load:           wrk -t$WRK_THREADS -c$CONNECTIONS -d${DURATION}s $SCHEME, server --threads $THREADS
  requests:       ${REQUESTS:-?} (${RPS:-?}/s)
  socket errors:  $SOCKET_ERRORS
  non-2xx/3xx:    $NON2XX
  RSS (kB):       start $RSS_START, t=${WARMUP}s $RSS_WARM, end $RSS_END (${DRIFT}%), after load $RSS_AFTER
  RSS samples:    ${SAMPLES[*]}
  sockets:        $SOCKETS_BEFORE before load (listeners), $SOCKETS_AFTER after
  SIGTERM exit:   $EXIT_CODE
SUMMARY
if [ "$FAILED" -ne 0 ]; then log "FAILED"; exit 1; fi
log "passed"
