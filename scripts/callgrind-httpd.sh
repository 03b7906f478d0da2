#!/usr/bin/env bash
# Instructions per request of runloop-httpd under valgrind's callgrind, independent of the load:
# the server (--threads 1) is run twice under callgrind, each time loaded by one kept-alive
# connection of Python's (`socket`, `ssl` for https) making FEW, then MANY requests one at a time;
# the figure is the slope, (instructions of the second run - of the first) / (MANY - FEW), all
# threads counted, so start-up and the handshake cancel out.
#
#   scripts/callgrind-httpd.sh [BINARY] [http|https]
#     BINARY  runloop-httpd to measure (default: the release build's; valgrind cannot read the
#             debug information of Swift 6.3's release binaries, so a copy stripped of it is run)
#   FEW=1000 MANY=4000
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BINARY=${1:-$(swift build -c release --show-bin-path)/runloop-httpd}
SCHEME=${2:-http}
FEW=${FEW:-1000}
MANY=${MANY:-4000}
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
strip --strip-debug -o "$work/runloop-httpd" "$BINARY"
tls=()
if [ "$SCHEME" = https ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$work/key.pem" \
        -out "$work/cert.pem" -days 1 -subj "/CN=localhost" 2>/dev/null
    tls=(--tls-cert "$work/cert.pem" --tls-key "$work/key.pem")
fi
cat >"$work/client.py" <<'PYTHON'
import socket, ssl, sys
scheme, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.create_connection(("127.0.0.1", port))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
if scheme == "https":
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    s = context.wrap_socket(s, server_hostname="localhost")
request = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"
pending = b""
for _ in range(count):
    s.sendall(request)
    while True:
        end = pending.find(b"\r\n\r\n")
        if end >= 0:
            head = pending[:end].decode().lower()
            length = int(head.split("content-length:")[1].split("\r\n")[0])
            if len(pending) >= end + 4 + length:
                pending = pending[end + 4 + length:]
                break
        data = s.recv(65536)
        if not data:
            sys.exit("the server closed the connection")
        pending += data
PYTHON
# Instructions of all the server's threads while it answers $1 requests.
instructions() {
    rm -f "$work"/callgrind.*
    : >"$work/server.out"
    valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$work/callgrind.%p" \
        "$work/runloop-httpd" --port 0 --threads 1 "${tls[@]}" >"$work/server.out" 2>&1 &
    local server=$! port=
    for _ in $(seq 600); do
        port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/server.out")
        [ -n "$port" ] && break
        sleep 0.1
    done
    [ -n "$port" ] || { cat "$work/server.out" >&2; exit 1; }
    python3 "$work/client.py" "$SCHEME" "$port" "$1"
    kill -TERM "$server"
    wait "$server" || true
    cat "$work"/callgrind.* | awk '/^summary:/ { total += $2 } END { print total }'
}
few=$(instructions "$FEW")
many=$(instructions "$MANY")
echo "$SCHEME: $(( (many - few) / (MANY - FEW) )) instructions per request ($few for $FEW requests, $many for $MANY)"
