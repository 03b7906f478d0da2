#!/usr/bin/env bash
# OpenSSL on the socket (SSL_set_fd) against OpenSSL over memory (its memory BIOs, and a BIO over
# libevent's evbuffers as RunLoopKit's TLS engine uses): ROUNDS alternating runs of
# scripts/tls-bio-bench.c each way (MEBIBYTES one way over loopback TCP, TLS 1.3, AES-256-GCM),
# then the median and the spread of each. Needs cc, libssl-dev and libevent-dev (make deps).
# With CALLGRIND=1, one run each way under valgrind's callgrind instead: instructions per byte.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROUNDS="${ROUNDS:-5}"
MEBIBYTES="${MEBIBYTES:-1024}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/tls-bio-bench" scripts/tls-bio-bench.c $(pkg-config --cflags --libs openssl libevent_core) -pthread
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$work/key.pem" \
    -out "$work/cert.pem" -days 1 -subj "/CN=localhost" 2>/dev/null
MODES="fd bio evbuffer recv send"
if [ -n "${CALLGRIND:-}" ]; then
    for mode in $MODES; do
        valgrind --tool=callgrind --callgrind-out-file=/dev/null "$work/tls-bio-bench" "$mode" "$work/cert.pem" \
            "$work/key.pem" "$MEBIBYTES" 2>&1 | awk -v mode="$mode" -v bytes="$((MEBIBYTES << 20))" \
            '/Collected/ { printf "%s: %.2f instructions per byte\n", mode, $4 / bytes }'
    done
    exit 0
fi
for _ in $(seq "$ROUNDS"); do
    for mode in $MODES; do "$work/tls-bio-bench" "$mode" "$work/cert.pem" "$work/key.pem" "$MEBIBYTES"; done
done | sort | awk '
    { values[$1] = values[$1] " " $2 }
    END {
        for (mode in values) {
            count = split(substr(values[mode], 2), sorted, " ")
            printf "%s: median %.3f GB/s (min %.3f, max %.3f, %d runs)\n", mode, sorted[int((count + 1) / 2)], sorted[1], sorted[count], count
        }
    }'
