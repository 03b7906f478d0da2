# RunLoopKit — build, demo and test on Linux.
#
#   make demo    install libevent-dev (and libuv1-dev, libglib2.0-dev) if missing, then run the narrated demo
#   make test    install the same if missing, then run the unit tests
#   make test-sanitize  the whole suite under ThreadSanitizer and AddressSanitizer
#   make stress  the stress and model tests at full size
#   make serve-bench  load runloop-httpd, raw-httpd (C) and nginx with wrk, side by side
#                     (installs wrk and nginx if missing; settings: scripts/serve-bench.sh)
#   make fuzz    libFuzzer + AddressSanitizer on HTTPCore's request parser for FUZZ_SECONDS (60)
#                (seed corpus Fuzz/corpus, copied to FUZZ_DIR; entry point Fuzz/HTTPParserFuzz.swift)
#   make soak    runloop-httpd under wrk -c1000 for 60 s: errors, RSS, leaked sockets, clean exit
#                (settings: scripts/soak.sh)
#   make bench   build runloop-bench in release and run it (flags in BENCH_FLAGS,
#                e.g. make bench BENCH_FLAGS="--quick --json bench.json")
#
# Extra flags for `swift test` go in SWIFT_TEST_FLAGS, e.g.
#   make test SWIFT_TEST_FLAGS="--filter TimerTests"

SWIFT ?= swift
SWIFT_TEST_FLAGS ?=
BENCH_FLAGS ?=
SWIFTC ?= swiftc
FUZZ_SECONDS ?= 60
FUZZ_DIR ?= /tmp/runloopkit-fuzz

.PHONY: all deps build demo test test-sanitize stress serve-bench bench fuzz soak format lint clean

all: build

# libevent 2.1 from Debian/Ubuntu's libevent-dev (found via pkg-config as
# libevent_core), and libuv1-dev and libglib2.0-dev for runloop-bench's other C
# peers. Quiet and quick when they are already installed. apt-get update runs
# only when the package lists are missing or older than a day.
deps:
	@if ! pkg-config --exists libevent_core libuv glib-2.0 2>/dev/null; then \
		set -e; \
		SUDO=; \
		if [ "$$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then SUDO=sudo; fi; \
		PKGS=; \
		pkg-config --exists libevent_core 2>/dev/null || PKGS="$$PKGS libevent-dev"; \
		pkg-config --exists libuv 2>/dev/null || PKGS="$$PKGS libuv1-dev"; \
		pkg-config --exists glib-2.0 2>/dev/null || PKGS="$$PKGS libglib2.0-dev"; \
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

# The whole suite under ThreadSanitizer, then AddressSanitizer (separate build directories).
test-sanitize: deps
	$(SWIFT) build --build-tests --sanitize=thread --scratch-path .build/tsan
	TSAN_OPTIONS="halt_on_error=1 suppressions=$(CURDIR)/scripts/tsan.supp" \
		$(SWIFT) test --skip-build --sanitize=thread --scratch-path .build/tsan $(SWIFT_TEST_FLAGS)
	$(SWIFT) build --build-tests --sanitize=address --scratch-path .build/asan
	ASAN_OPTIONS="detect_leaks=0" \
		$(SWIFT) test --skip-build --sanitize=address --scratch-path .build/asan $(SWIFT_TEST_FLAGS)

# The stress tests at full size (8 × 1,000,000 posts, 10,000 threads, ...).
stress: deps
	RUNLOOPKIT_STRESS=1 RUNLOOPKIT_MODEL_RUNS=20000 $(SWIFT) test -c release --filter "StressTests|ModelTests"

serve-bench: deps
	SWIFT="$(SWIFT)" scripts/serve-bench.sh

bench: deps
	$(SWIFT) build -c release --product runloop-bench
	.build/release/runloop-bench $(BENCH_FLAGS)

# Builds the fuzzer with swiftc directly (HTTPCore's sources plus the entry point, one module) and
# runs it on a scratch copy of the seed corpus, so new inputs do not land in the repository.
# Crashing inputs are written to $(FUZZ_DIR)/artifacts. The fuzzer runtime ships with the Swift
# toolchain; when it is missing, Debian/Ubuntu's libclang-rt-14-dev is installed.
fuzz:
	@if ! ls "$$(dirname "$$(command -v $(SWIFTC))")"/../lib/clang/*/lib/linux/libclang_rt.fuzzer-*.a \
		/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-*.a >/dev/null 2>&1; then \
		set -e; \
		SUDO=; \
		if [ "$$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then SUDO=sudo; fi; \
		if [ -z "$$(find /var/lib/apt/lists -maxdepth 1 -name '*_Packages*' -mtime -1 2>/dev/null | head -n 1)" ]; then \
			echo "fuzz: updating apt package lists"; \
			$$SUDO apt-get update; \
		fi; \
		echo "fuzz: installing libclang-rt-14-dev"; \
		$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y libclang-rt-14-dev; \
	fi
	rm -rf $(FUZZ_DIR)/corpus $(FUZZ_DIR)/artifacts
	mkdir -p $(FUZZ_DIR)/corpus $(FUZZ_DIR)/artifacts
	cp Fuzz/corpus/* $(FUZZ_DIR)/corpus/
	$(SWIFTC) -sanitize=fuzzer,address -parse-as-library -O -g -module-name HTTPParserFuzz \
		Sources/HTTPCore/*.swift Fuzz/HTTPParserFuzz.swift -o $(FUZZ_DIR)/http-parser-fuzz
	SWIFT_BACKTRACE=enable=no $(FUZZ_DIR)/http-parser-fuzz -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
		-artifact_prefix=$(FUZZ_DIR)/artifacts/ $(FUZZ_DIR)/corpus

soak: deps
	SWIFT="$(SWIFT)" scripts/soak.sh

format:
	$(SWIFT) format --in-place --recursive Sources Tests Package.swift

lint:
	$(SWIFT) format lint --recursive Sources Tests

clean:
	$(SWIFT) package clean
	rm -rf .build
