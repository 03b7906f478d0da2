# RunLoopKit — build, demo and test on Linux.
#
#   make demo    install libevent-dev if missing, then run the narrated demo
#   make test    install libevent-dev if missing, then run the unit tests
#   make serve-bench  load runloop-httpd, raw-httpd (C) and nginx with wrk, side by side
#                     (installs wrk and nginx if missing; settings: scripts/serve-bench.sh)
#   make bench   build runloop-bench in release and run it (flags in BENCH_FLAGS,
#                e.g. make bench BENCH_FLAGS="--quick --json bench.json")
#
# Extra flags for `swift test` go in SWIFT_TEST_FLAGS, e.g.
#   make test SWIFT_TEST_FLAGS="--filter TimerTests"

SWIFT ?= swift
SWIFT_TEST_FLAGS ?=
BENCH_FLAGS ?=

.PHONY: all deps build demo test serve-bench bench format lint clean

all: build

# libevent 2.1 from Debian/Ubuntu's libevent-dev (found via pkg-config as
# libevent_core). Quiet and quick when it is already installed. apt-get update
# runs only when the package lists are missing or older than a day.
deps:
	@if ! pkg-config --exists libevent_core 2>/dev/null; then \
		set -e; \
		SUDO=; \
		if [ "$$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then SUDO=sudo; fi; \
		PKGS=libevent-dev; \
		command -v pkg-config >/dev/null 2>&1 || PKGS="$$PKGS pkg-config"; \
		if [ -z "$$(find /var/lib/apt/lists -maxdepth 1 -name '*_Packages*' -mtime -1 2>/dev/null | head -n 1)" ]; then \
			echo "deps: updating apt package lists"; \
			$$SUDO apt-get update; \
		fi; \
		echo "deps: installing $$PKGS"; \
		$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y $$PKGS; \
	fi

build: deps
	$(SWIFT) build

demo: deps
	$(SWIFT) run runloop-demo

test: deps
	$(SWIFT) test $(SWIFT_TEST_FLAGS)

serve-bench: deps
	SWIFT="$(SWIFT)" scripts/serve-bench.sh

bench: deps
	$(SWIFT) build -c release --product runloop-bench
	.build/release/runloop-bench $(BENCH_FLAGS)

format:
	$(SWIFT) format --in-place --recursive Sources Tests Package.swift

lint:
	$(SWIFT) format lint --recursive Sources Tests

clean:
	$(SWIFT) package clean
	rm -rf .build
