#!/usr/bin/env bash
# Loads runloop-httpd, raw-httpd (the same server on raw libevent, in C) and nginx in turn with the
# same wrk settings, several alternating rounds, and prints the requests/s medians and the ratio of
# runloop-httpd to each. Then the HTTPS round: runloop-httpd (--tls-cert, --tls-key) and nginx with
# the same certificate (EC P-256, made for the run by the openssl command line), TLS 1.3,
# keep-alive, wrk over https (raw-httpd speaks no TLS). `make serve-bench` runs it.
#
# Settings (environment variables):
#   ROUNDS=5        rounds (at least 3); each round runs every server once, in a rotating order
#   DURATION=10s    wrk duration per run
#   WARMUP=2s       wrk warm-up before each measured run (not counted; 0 to skip)
#   CONNECTIONS=100 wrk connections
#   WRK_THREADS=2   wrk threads
#   THREADS=<cores> server threads (nginx: worker processes)
#   URL_PATH=/      path requested
#   NGINX_PORT=18089
#   SERVERS="runloop-httpd raw-httpd nginx"
#   SCHEMES="http https"  the rounds to run (https: the servers of SERVERS that speak TLS)
#   SCRATCH_PATH=   swift build --scratch-path (default: the package's .build)
#   SWIFT=swift
#
# Everything runs on loopback; servers are started and stopped by this script only.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
CONNECTIONS=${CONNECTIONS:-100}
WRK_THREADS=${WRK_THREADS:-2}
THREADS=${THREADS:-$(nproc)}
URL_PATH=${URL_PATH:-/}
NGINX_PORT=${NGINX_PORT:-18089}
SERVERS=${SERVERS:-"runloop-httpd raw-httpd nginx"}
SCHEMES=${SCHEMES:-"http https"}
SWIFT=${SWIFT:-swift}
SCRATCH_FLAGS=()
if [ -n "${SCRATCH_PATH:-}" ]; then SCRATCH_FLAGS=(--scratch-path "$SCRATCH_PATH"); fi

log() { printf '%s\n' "$*" >&2; }

# --- Tools: wrk and nginx from Debian/Ubuntu packages when missing --------------------------------

find_nginx() { command -v nginx 2>/dev/null || { [ -x /usr/sbin/nginx ] && echo /usr/sbin/nginx; } || true; }

install_tools() {
    local packages=()
    command -v wrk >/dev/null 2>&1 || packages+=(wrk)
    case " $SERVERS " in *" nginx "*) [ -n "$(find_nginx)" ] || packages+=(nginx) ;; esac
    [ ${#packages[@]} -eq 0 ] && return
    "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh" "${packages[@]}"
}

install_tools
NGINX=$(find_nginx)

# --- Build ----------------------------------------------------------------------------------------

log "serve-bench: building runloop-httpd and raw-httpd (release)"
"$SWIFT" build -c release "${SCRATCH_FLAGS[@]}" --product runloop-httpd >&2
"$SWIFT" build -c release "${SCRATCH_FLAGS[@]}" --product raw-httpd >&2
BIN=$("$SWIFT" build -c release "${SCRATCH_FLAGS[@]}" --show-bin-path)

# --- Running one server ---------------------------------------------------------------------------

WORK=$(mktemp -d /tmp/serve-bench.XXXXXX)
SERVER_PID=
cleanup() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

# The HTTPS round's certificate, shared by every server.
CERT="$WORK/cert.pem"
KEY="$WORK/key.pem"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$KEY" -out "$CERT" \
    -days 1 -subj "/CN=localhost" 2>/dev/null
SCHEME=http

# Answers "Hello, World!" on GET / (checked with bash's /dev/tcp over HTTP, openssl s_client over
# HTTPS: no other client tool needed).
check_response() {
    local port=$1 reply
    if [ "$SCHEME" = https ]; then
        reply=$(printf 'GET / HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n' |
            timeout 5 openssl s_client -quiet -tls1_3 -connect "127.0.0.1:$port" 2>/dev/null || true)
        case "$reply" in
            "HTTP/1.1 200 OK"*"Hello, World!") return 0 ;;
            *) log "serve-bench: unexpected reply on port $port over HTTPS: $reply"; return 1 ;;
        esac
    fi
    reply=$(timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port
        printf 'GET / HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n' >&3
        cat <&3" 2>/dev/null || true)
    case "$reply" in
        "HTTP/1.1 200 OK"*"Hello, World!") return 0 ;;
        *) log "serve-bench: unexpected reply on port $port: $reply"; return 1 ;;
    esac
}

# Starts server $1; sets SERVER_PID and PORT.
start_server() {
    local name=$1 out="$WORK/$1.out"
    : >"$out"
    case "$name" in
        runloop-httpd | raw-httpd)
            local tls=()
            [ "$SCHEME" = https ] && tls=(--tls-cert "$CERT" --tls-key "$KEY")
            "$BIN/$name" --port 0 --threads "$THREADS" "${tls[@]}" >"$out" 2>&1 &
            SERVER_PID=$!
            PORT=
            for _ in $(seq 100); do
                PORT=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$out")
                [ -n "$PORT" ] && break
                sleep 0.05
            done
            ;;
        nginx)
            local prefix="$WORK/nginx"
            mkdir -p "$prefix"
            local ssl=
            [ "$SCHEME" = https ] && ssl=ssl
            sed -e "s|@WORKERS@|$THREADS|g" -e "s|@PORT@|$NGINX_PORT|g" -e "s|@PREFIX@|$prefix|g" \
                -e "s|@USER@|$(id -un) $(id -gn)|g" -e "s|@SSL@|$ssl|g" -e "s|@CERT@|$CERT|g" -e "s|@KEY@|$KEY|g" \
                scripts/nginx-bench.conf >"$prefix/nginx.conf"
            "$NGINX" -p "$prefix" -c "$prefix/nginx.conf" -e "$prefix/error.log" >"$out" 2>&1 &
            SERVER_PID=$!
            PORT=$NGINX_PORT
            for _ in $(seq 100); do
                (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
                sleep 0.05
            done
            ;;
    esac
    if [ -z "$PORT" ] || ! check_response "$PORT"; then
        log "serve-bench: $name did not start:"
        cat "$out" >&2
        [ "$name" = nginx ] && cat "$WORK/nginx/error.log" >&2 2>/dev/null
        exit 1
    fi
}

stop_server() {
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=
}

# CPU time (clock ticks, user + system) of the server and its child processes (nginx workers).
server_ticks() {
    local pids
    pids="$SERVER_PID $(pgrep -P "$SERVER_PID" 2>/dev/null | tr '\n' ' ')"
    for pid in $pids; do cat "/proc/$pid/stat" 2>/dev/null; done |
        awk '{ sub(/^.*\) /, ""); total += $12 + $13 } END { print total + 0 }'
}

# One wrk run against $1; prints requests/s, p50, p99 and server CPU microseconds per request.
measure() {
    local name=$1 out="$WORK/wrk.out"
    start_server "$name"
    if [ "$WARMUP" != 0 ] && [ "$WARMUP" != 0s ]; then
        wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d"$WARMUP" "$SCHEME://127.0.0.1:$PORT$URL_PATH" >/dev/null
    fi
    local ticks_before ticks_after
    ticks_before=$(server_ticks)
    wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency "$SCHEME://127.0.0.1:$PORT$URL_PATH" >"$out"
    ticks_after=$(server_ticks)
    stop_server
    if grep -q -e "Non-2xx" -e "Socket errors" "$out"; then
        log "serve-bench: $name: $(grep -e "Non-2xx" -e "Socket errors" "$out" | tr -s ' ' | paste -sd ';')"
    fi
    local rps p50 p99 requests cpu
    rps=$(awk '/^Requests\/sec:/ {print $2}' "$out")
    p50=$(awk '$1 == "50%" {print $2}' "$out")
    p99=$(awk '$1 == "99%" {print $2}' "$out")
    requests=$(awk '/requests in/ {print $1}' "$out")
    cpu=$(awk -v t="$((ticks_after - ticks_before))" -v hz="$(getconf CLK_TCK)" -v n="$requests" \
        'BEGIN { printf "%.2f", (n > 0 ? t * 1e6 / hz / n : 0) }')
    printf '%s %s %s %s\n' "$rps" "$p50" "$p99" "$cpu"
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# --- Rounds ---------------------------------------------------------------------------------------

read -r -a ALL_NAMES <<<"$SERVERS"
for name in "${ALL_NAMES[@]}"; do
    case "$name" in
        runloop-httpd | raw-httpd | nginx) ;;
        *) log "serve-bench: unknown server $name"; exit 2 ;;
    esac
done

# One scheme's rounds and its summary.
run_scheme() {
    SCHEME=$1
    NAMES=()
    for name in "${ALL_NAMES[@]}"; do
        # raw-httpd speaks no TLS.
        [ "$SCHEME" = https ] && [ "$name" = raw-httpd ] && continue
        NAMES+=("$name")
        : >"$WORK/$name.rps"
        : >"$WORK/$name.cpu"
    done
    [ ${#NAMES[@]} -eq 0 ] && return

    log "serve-bench: $ROUNDS rounds of wrk -t$WRK_THREADS -c$CONNECTIONS -d$DURATION $SCHEME://127.0.0.1:PORT$URL_PATH" \
        "(warm-up $WARMUP), servers with $THREADS threads, $(nproc) cores"
    for round in $(seq "$ROUNDS"); do
        # Rotate the order each round so that no server always runs first or last.
        order=()
        for i in "${!NAMES[@]}"; do order+=("${NAMES[$(((i + round - 1) % ${#NAMES[@]}))]}"); done
        for name in "${order[@]}"; do
            read -r rps p50 p99 cpu < <(measure "$name")
            echo "$rps" >>"$WORK/$name.rps"
            echo "$cpu" >>"$WORK/$name.cpu"
            log "  round $round  $(printf '%-14s' "$name") $(printf '%10.0f' "$rps") requests/s" \
                "  p50 $p50  p99 $p99  server CPU $cpu us/request"
        done
    done

    echo
    echo "$SCHEME: wrk -t$WRK_THREADS -c$CONNECTIONS -d$DURATION, $ROUNDS rounds, servers with $THREADS threads on" \
        "$(nproc) cores (loopback, wrk on the same machine$([ "$SCHEME" = https ] && echo ", TLS 1.3, EC P-256"))"
    echo
    printf '| %-14s | %12s | %-34s | %16s |\n' server "median req/s" "all rounds (req/s)" "server CPU µs/req"
    printf '|%s|%s|%s|%s|\n' "----------------" "--------------" "------------------------------------" "------------------"
    for name in "${NAMES[@]}"; do
        med=$(median <"$WORK/$name.rps")
        eval "MEDIAN_${name//-/_}=$med"
        printf '| %-14s | %12.0f | %-34s | %16.2f |\n' "$name" "$med" \
            "$(awk '{printf "%s%.0f", (NR > 1 ? ", " : ""), $1}' "$WORK/$name.rps")" "$(median <"$WORK/$name.cpu")"
    done
    echo
    if [ -n "${MEDIAN_runloop_httpd:-}" ]; then
        for other in "${NAMES[@]}"; do
            [ "$other" = runloop-httpd ] && continue
            var="MEDIAN_${other//-/_}"
            awk -v a="$MEDIAN_runloop_httpd" -v b="${!var}" -v name="$other" -v scheme="$SCHEME" \
                'BEGIN { printf "%s: runloop-httpd / %-9s = %.2f\n", scheme, name, a / b }'
        done
    fi
    unset MEDIAN_runloop_httpd MEDIAN_raw_httpd MEDIAN_nginx
}

for scheme in $SCHEMES; do run_scheme "$scheme"; done
