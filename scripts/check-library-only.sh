#!/usr/bin/env bash
# Builds and runs a package that depends only on the RunLoopKit product, with pkg-config seeing the
# library's own system libraries alone (libevent, and OpenSSL's .pc files where installed), as on a
# machine without libuv1-dev or libglib2.0-dev. Fails on any warning of the build: SwiftPM warns
# "you may be able to install ... using your system-packager" for each pkg-config name of the
# dependency graph it cannot find. Nothing is uninstalled; the other libraries are hidden.
#
# SwiftPM takes its .pc search path from `pkg-config --variable pc_path pkg-config` and ignores
# PKG_CONFIG_LIBDIR, so a pkg-config first on PATH answers that question with the directory of
# visible .pc files and passes everything else to the real one (with PKG_CONFIG_LIBDIR set).
#
# Settings (environment):
#   SWIFT=swift
#   WORK=.build/check-library-only   the consumer package and its build (kept: reruns are quick)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
SWIFT=${SWIFT:-swift}
WORK=${WORK:-$ROOT/.build/check-library-only}
VISIBLE="libevent libevent_core libevent_pthreads libevent_extra libevent_openssl libssl libcrypto openssl"
HIDDEN="libuv glib-2.0"

REAL_PKG_CONFIG=$(command -v pkg-config)
rm -rf "$WORK/pc" "$WORK/bin"
mkdir -p "$WORK/pc" "$WORK/bin" "$WORK/consumer/Sources/consumer"
for name in $VISIBLE; do
    if "$REAL_PKG_CONFIG" --exists "$name"; then
        ln -s "$("$REAL_PKG_CONFIG" --variable pcfiledir "$name")/$name.pc" "$WORK/pc/$name.pc"
    fi
done
cat >"$WORK/bin/pkg-config" <<WRAPPER
#!/bin/sh
if [ "\$*" = "--variable pc_path pkg-config" ]; then echo "$WORK/pc"; exit 0; fi
PKG_CONFIG_LIBDIR="$WORK/pc" PKG_CONFIG_PATH= exec "$REAL_PKG_CONFIG" "\$@"
WRAPPER
chmod +x "$WORK/bin/pkg-config"
export PATH="$WORK/bin:$PATH"

# SwiftPM also searches a few fixed directories: the hidden libraries must not be there.
for name in $HIDDEN; do
    for dir in /usr/local/lib/pkgconfig /usr/local/share/pkgconfig /usr/lib/pkgconfig /usr/share/pkgconfig; do
        if [ -e "$dir/$name.pc" ]; then
            echo "check-library-only: cannot hide $dir/$name.pc from SwiftPM" >&2
            exit 2
        fi
    done
    if pkg-config --exists "$name"; then
        echo "check-library-only: $name is still visible to pkg-config" >&2
        exit 2
    fi
done
echo "check-library-only: pkg-config sees $(cd "$WORK/pc" && ls | tr '\n' ' ')"

cat >"$WORK/consumer/Package.swift" <<MANIFEST
// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "consumer",
    dependencies: [.package(name: "RunLoopKit", path: "$ROOT")],
    targets: [
        .executableTarget(
            name: "consumer",
            dependencies: [.product(name: "RunLoopKit", package: "RunLoopKit")]
        )
    ],
    swiftLanguageModes: [.v6]
)
MANIFEST
cat >"$WORK/consumer/Sources/consumer/main.swift" <<'MAIN'
import RunLoopKit

let loop = Loop.current
let timer = LoopTimer(after: .milliseconds(10)) { _ in
    print("consumer: a RunLoopKit timer fired")
    Loop.current.stop()
}
loop.add(timer, forMode: .default)
loop.run(mode: .default, for: .seconds(5))
MAIN

log="$WORK/build.log"
status=0
"$SWIFT" build --package-path "$WORK/consumer" >"$log" 2>&1 || status=$?
grep -v -e '^\[[0-9]*/[0-9]*\]' "$log" || true
if [ "$status" -ne 0 ]; then
    echo "check-library-only: the build failed" >&2
    exit 1
fi
if grep -qi "warning" "$log"; then
    echo "check-library-only: the build warned (above)" >&2
    exit 1
fi
"$("$SWIFT" build --package-path "$WORK/consumer" --show-bin-path)/consumer"
echo "check-library-only: a package depending only on RunLoopKit builds without warnings with pkg-config seeing only $(cd "$WORK/pc" && ls | sed 's/\.pc$//' | tr '\n' ' ')"
