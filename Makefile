# RunLoopKit — build, demo and test on Linux.
#
#   make demo    install libevent-dev and libssl-dev if missing, then run the narrated demo
#   make test    install libevent-dev, libssl-dev, tmux (and libuv1-dev, libglib2.0-dev for the benchmark) if
#                missing, then run the unit tests (the documentation's programs of Examples/ among them, run
#                as child processes), then the benchmark's smoke tests (package Benchmarks/)
#   make test-sanitize  the whole suite under ThreadSanitizer and AddressSanitizer
#   make compile-checks  the handler rules as the compiler sees them: the small programs of
#                Tests/CompileChecks compiled in Swift 6 mode (racy ones must not compile, safe ones
#                must run; scripts/compile-checks.sh)
#   make stress  the stress and model tests at full size
#   make serve-bench  load runloop-httpd, raw-httpd (C) and nginx with wrk, side by side, then
#                     runloop-httpd and nginx over HTTPS (installs wrk and nginx if missing;
#                     settings: scripts/serve-bench.sh)
#   make fuzz    libFuzzer + AddressSanitizer on HTTPCore's request parser for FUZZ_SECONDS (60)
#                (seed corpus Fuzz/corpus, copied to FUZZ_DIR; entry point Fuzz/HTTPParserFuzz.swift),
#                then `make fuzz-tls`: the TLS engine's handshake and record path, as long
#                (seed corpus Fuzz/tls-corpus; entry point Fuzz/TLSHandshakeFuzz.swift)
#   make soak    runloop-httpd under wrk -c1000 for 60 s: errors, RSS, leaked sockets, clean exit
#                (settings: scripts/soak.sh)
#   make bench   build runloop-bench (package Benchmarks/) in release and run it from here (flags
#                in BENCH_FLAGS, e.g. make bench BENCH_FLAGS="--quick --json bench.json")
#   make check-library-only  build a package that depends only on the RunLoopKit product with
#                pkg-config seeing libevent alone: fails on any warning about another library
#                (scripts/check-library-only.sh)
#   make docs    the DocC site of RunLoopKit in .build/docs (static; DOCS_BASE_PATH for a sub-path),
#                failing on any public declaration without a /// comment or any Swift snippet of
#                the articles or README.md that no test runs (catalog, the user guide:
#                Sources/RunLoopKit/RunLoopKit.docc)
#   make docs-serve  make docs, then serve .build/docs on http://127.0.0.1:$(DOCS_PORT) (8000)
#   make api-check  the public API of RunLoopKit and RunLoopKitMainExecutor against the baseline in
#                api/ (swift package diagnose-api-breaking-changes): a removal or rename fails it
#   make api-baseline  record the current API in api/ (for an intended break: see docs/Reliability.md)
#   make coverage  the whole suite with code coverage (own build in .build/coverage), then the line
#                coverage of Sources/RunLoopKit per file, least covered first (also in
#                .build/coverage/RunLoopKit.md)
#
# Extra flags for `swift test` go in SWIFT_TEST_FLAGS (BENCH_TEST_FLAGS for the benchmark's tests,
# the same by default), e.g.
#   make test SWIFT_TEST_FLAGS="--filter TimerTests"

SWIFT ?= swift
SWIFT_TEST_FLAGS ?=
BENCH_TEST_FLAGS ?= $(SWIFT_TEST_FLAGS)
BENCH_PACKAGE = Benchmarks
BENCH_FLAGS ?=
SWIFTC ?= swiftc
FUZZ_SECONDS ?= 60
TLS ?=
FUZZ_DIR ?= /tmp/runloopkit-fuzz
FUZZ_TLS_DIR ?= /tmp/runloopkit-fuzz-tls
DOCC ?= docc
DOCS_DIR ?= .build/docs
DOCS_BASE_PATH ?=
DOCS_PORT ?= 8000
SWIFT_API_DIGESTER ?= swift-api-digester
API_MODULES = RunLoopKit RunLoopKitMainExecutor
COVERAGE_PATH ?= .build/coverage

.PHONY: all deps bench-deps check-library-only python-deps build demo test test-sanitize compile-checks stress serve-bench bench fuzz fuzz-tls soak docs docs-serve \
	api-check api-baseline coverage format lint clean

all: build

# The libraries the build needs, as pkg-config-name:Debian-package. The library's targets need
# libevent 2.1 (libevent-dev, found as libevent_core); the benchmark's other C peers need libuv
# and GLib, installed only for the targets that build the benchmark. Quiet and quick when they are
# installed (scripts/apt-install.sh otherwise).
LIBRARY_DEPS = libevent_core:libevent-dev openssl:libssl-dev
BENCH_DEPS = libuv:libuv1-dev glib-2.0:libglib2.0-dev

define install-missing
	@missing=; \
	command -v pkg-config >/dev/null 2>&1 || missing=pkg-config; \
	for dep in $(1); do \
		pkg-config --exists "$${dep%%:*}" 2>/dev/null || missing="$$missing $${dep#*:}"; \
	done; \
	if [ -n "$$missing" ]; then scripts/apt-install.sh $$missing; fi
endef

# The TLS tests make their certificates and run their peers with the openssl command line; the
# tests of the documentation's programs type into a terminal of tmux's.
deps:
	$(call install-missing,$(LIBRARY_DEPS))
	@command -v openssl >/dev/null 2>&1 || scripts/apt-install.sh openssl
	@command -v tmux >/dev/null 2>&1 || scripts/apt-install.sh tmux
	@command -v systemd-socket-activate >/dev/null 2>&1 || scripts/apt-install.sh systemd

bench-deps: deps
	$(call install-missing,$(BENCH_DEPS))

# python3, for the scripts of the docs, API and coverage targets.
python-deps:
	@command -v python3 >/dev/null 2>&1 || scripts/apt-install.sh python3

build: deps
	$(SWIFT) build

demo: deps
	$(SWIFT) run runloop-demo

test: deps bench-deps
	$(SWIFT) test $(SWIFT_TEST_FLAGS)
	$(SWIFT) test --package-path $(BENCH_PACKAGE) $(BENCH_TEST_FLAGS)

# The whole suite under ThreadSanitizer, then AddressSanitizer (separate build directories), each
# followed by the benchmark's tests.
test-sanitize: deps bench-deps
	$(SWIFT) build --build-tests --sanitize=thread --scratch-path .build/tsan
	TSAN_OPTIONS="halt_on_error=1 suppressions=$(CURDIR)/scripts/tsan.supp" \
		$(SWIFT) test --skip-build --sanitize=thread --scratch-path .build/tsan $(SWIFT_TEST_FLAGS)
	TSAN_OPTIONS="halt_on_error=1 suppressions=$(CURDIR)/scripts/tsan.supp" \
		$(SWIFT) test --package-path $(BENCH_PACKAGE) --sanitize=thread --scratch-path $(BENCH_PACKAGE)/.build/tsan \
		$(BENCH_TEST_FLAGS)
	$(SWIFT) build --build-tests --sanitize=address --scratch-path .build/asan
	ASAN_OPTIONS="detect_leaks=0" \
		$(SWIFT) test --skip-build --sanitize=address --scratch-path .build/asan $(SWIFT_TEST_FLAGS)
	ASAN_OPTIONS="detect_leaks=0" \
		$(SWIFT) test --package-path $(BENCH_PACKAGE) --sanitize=address --scratch-path $(BENCH_PACKAGE)/.build/asan \
		$(BENCH_TEST_FLAGS)

# Racy programs must fail to compile, safe ones must compile without a warning and run, programs
# that misuse a run-time check must stop with its message (scripts/compile-checks.sh).
compile-checks: deps
	$(SWIFT) build --target RunLoopKit
	scripts/compile-checks.sh "$$($(SWIFT) build --show-bin-path)"

# The stress tests at full size (8 × 1,000,000 posts, 10,000 threads, ...).
stress: deps
	RUNLOOPKIT_STRESS=1 RUNLOOPKIT_MODEL_RUNS=20000 $(SWIFT) test -c release --filter "StressTests|ModelTests"

serve-bench: deps
	SWIFT="$(SWIFT)" scripts/serve-bench.sh

# Run from the repository's root, so paths in BENCH_FLAGS (--json docs/benchmarks/...) are its.
bench: bench-deps
	$(SWIFT) build -c release --package-path $(BENCH_PACKAGE) --product runloop-bench
	"$$($(SWIFT) build -c release --package-path $(BENCH_PACKAGE) --show-bin-path)/runloop-bench" $(BENCH_FLAGS)

check-library-only: deps
	SWIFT="$(SWIFT)" scripts/check-library-only.sh

# Builds the fuzzer with swiftc directly (HTTPCore's sources plus the entry point, one module) and
# runs it on a scratch copy of the seed corpus, so new inputs do not land in the repository.
# Crashing inputs are written to $(FUZZ_DIR)/artifacts. The fuzzer runtime ships with the Swift
# toolchain; when it is missing, Debian/Ubuntu's libclang-rt-14-dev is installed.
fuzz:
	@if ! ls "$$(dirname "$$(command -v $(SWIFTC))")"/../lib/clang/*/lib/linux/libclang_rt.fuzzer-*.a \
		/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-*.a >/dev/null 2>&1; then \
		scripts/apt-install.sh libclang-rt-14-dev; \
	fi
	rm -rf $(FUZZ_DIR)/corpus $(FUZZ_DIR)/artifacts
	mkdir -p $(FUZZ_DIR)/corpus $(FUZZ_DIR)/artifacts
	cp Fuzz/corpus/* $(FUZZ_DIR)/corpus/
	$(SWIFTC) -sanitize=fuzzer,address -parse-as-library -O -g -module-name HTTPParserFuzz \
		Sources/HTTPCore/*.swift Fuzz/HTTPParserFuzz.swift -o $(FUZZ_DIR)/http-parser-fuzz
	SWIFT_BACKTRACE=enable=no $(FUZZ_DIR)/http-parser-fuzz -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
		-artifact_prefix=$(FUZZ_DIR)/artifacts/ $(FUZZ_DIR)/corpus
	$(MAKE) fuzz-tls

# The TLS engine's server side under libFuzzer + AddressSanitizer for FUZZ_SECONDS: RunLoopKit's
# sources and the entry point Fuzz/TLSHandshakeFuzz.swift compiled as one module (CPlatform's C
# file with clang, found through a module map made here), fed client ciphertext from the seed
# corpus Fuzz/tls-corpus (ClientHellos of openssl s_client, TLS 1.3 and 1.2), with a certificate
# made by the openssl command line. Crashing inputs go to $(FUZZ_TLS_DIR)/artifacts.
fuzz-tls: deps
	rm -rf $(FUZZ_TLS_DIR) && mkdir -p $(FUZZ_TLS_DIR)/CPlatform $(FUZZ_TLS_DIR)/corpus $(FUZZ_TLS_DIR)/artifacts
	cp Fuzz/tls-corpus/* $(FUZZ_TLS_DIR)/corpus/
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout $(FUZZ_TLS_DIR)/key.pem \
		-out $(FUZZ_TLS_DIR)/cert.pem -days 1 -subj "/CN=localhost" 2>/dev/null
	for source in Sources/CPlatform/*.c; do \
		clang -O1 -g -fsanitize=address -c $$source -I Sources/CPlatform/include \
			-o $(FUZZ_TLS_DIR)/$$(basename $$source .c).o || exit 1; \
	done
	printf 'module CPlatform {\n    header "%s/Sources/CPlatform/include/rlk_platform.h"\n    export *\n}\n' "$(CURDIR)" \
		>$(FUZZ_TLS_DIR)/CPlatform/module.modulemap
	$(SWIFTC) -swift-version 6 -package-name RunLoopKit -sanitize=fuzzer,address -parse-as-library -O -g \
		-module-name TLSHandshakeFuzz $$(find Sources/RunLoopKit -name '*.swift' | sort) Fuzz/TLSHandshakeFuzz.swift \
		-I Modulemaps/CLibevent -I Modulemaps/COpenSSL -I $(FUZZ_TLS_DIR)/CPlatform $(FUZZ_TLS_DIR)/*.o \
		-levent_core -lssl -lcrypto -o $(FUZZ_TLS_DIR)/tls-handshake-fuzz
	FUZZ_TLS_DIR=$(FUZZ_TLS_DIR) SWIFT_BACKTRACE=enable=no $(FUZZ_TLS_DIR)/tls-handshake-fuzz \
		-max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 -artifact_prefix=$(FUZZ_TLS_DIR)/artifacts/ \
		$(FUZZ_TLS_DIR)/corpus

soak: deps
	SWIFT="$(SWIFT)" TLS="$(TLS)" scripts/soak.sh

# The DocC site. Symbol graphs come from the debug build's modules (swift symbolgraph-extract: no
# second build with other flags); RunLoopKitMainExecutor's is checked for /// comments too. Every
# ```swift block of the articles and of README.md must be in a file that compiles and runs it
# (scripts/check-doc-snippets.py): in Tests/RunLoopKitTests, DocumentationTests.swift, the test
# files the script's table names for an article (one per concept) and ReadmeTests.swift, or in the
# main.swift of a program of Examples/ that the tests run. docc treats warnings (broken links) as
# errors.
docs: deps python-deps
	$(SWIFT) build --target RunLoopKitMainExecutor
	rm -rf .build/symbol-graphs && mkdir -p .build/symbol-graphs/RunLoopKit .build/symbol-graphs/RunLoopKitMainExecutor
	@set -e; \
	flags="$$(scripts/swift-module-flags.sh "$$($(SWIFT) build --show-bin-path)")"; \
	triple="$$($(SWIFTC) -print-target-info | python3 -c 'import json, sys; print(json.load(sys.stdin)["target"]["triple"])')"; \
	for module in RunLoopKit RunLoopKitMainExecutor; do \
		echo "docs: symbol graph of $$module"; \
		$(SWIFT) symbolgraph-extract -module-name $$module -target "$$triple" $$flags \
			-minimum-access-level public -output-dir .build/symbol-graphs/$$module; \
	done
	python3 scripts/doc-coverage.py --landing Sources/RunLoopKit/RunLoopKit.docc/RunLoopKit.md \
		.build/symbol-graphs/RunLoopKit/*.symbols.json .build/symbol-graphs/RunLoopKitMainExecutor/*.symbols.json
	python3 scripts/check-doc-snippets.py
	rm -rf $(DOCS_DIR)
	$(DOCC) convert Sources/RunLoopKit/RunLoopKit.docc \
		--additional-symbol-graph-dir .build/symbol-graphs/RunLoopKit \
		--fallback-display-name RunLoopKit --fallback-bundle-identifier org.runloopkit.RunLoopKit \
		--transform-for-static-hosting $(if $(DOCS_BASE_PATH),--hosting-base-path $(DOCS_BASE_PATH)) \
		--warnings-as-errors --output-path $(DOCS_DIR)
	@echo "docs: the site is in $(DOCS_DIR). To read it:"
	@echo "  make docs-serve    (or: cd $(DOCS_DIR) && python3 -m http.server $(DOCS_PORT) --bind 127.0.0.1)"
	@echo "  then open http://127.0.0.1:$(DOCS_PORT)/$(if $(DOCS_BASE_PATH),$(DOCS_BASE_PATH)/)documentation/runloopkit/"

docs-serve: docs
	@echo "docs: serving $(DOCS_DIR) on http://127.0.0.1:$(DOCS_PORT)/documentation/runloopkit/ (Ctrl-C stops)"
	cd $(DOCS_DIR) && python3 -m http.server $(DOCS_PORT) --bind 127.0.0.1

# The API baseline is checked in (api/<module>.json, from swift-api-digester -dump-sdk), so a fresh
# clone can check without building an older revision. SwiftPM looks a baseline up under the
# commit its treeish names, so the files are staged under HEAD's hash in .build/api-baseline;
# diagnose-api-breaking-changes then only dumps the current build and compares.
api-check: deps
	$(SWIFT) build --target RunLoopKitMainExecutor
	@set -e; \
	revision="$$(git rev-parse HEAD)"; \
	rm -rf .build/api-baseline; \
	mkdir -p .build/api-baseline/$$revision; \
	for module in $(API_MODULES); do cp api/$$module.json .build/api-baseline/$$revision/; done
	$(SWIFT) package diagnose-api-breaking-changes HEAD --baseline-dir .build/api-baseline \
		--targets $(API_MODULES)

# Dumps the API of the working tree's build (not of a commit) into api/.
api-baseline: deps python-deps
	$(SWIFT) build --target RunLoopKitMainExecutor
	@set -e; \
	flags="$$(scripts/swift-module-flags.sh "$$($(SWIFT) build --show-bin-path)")"; \
	triple="$$($(SWIFTC) -print-target-info | python3 -c 'import json, sys; print(json.load(sys.stdin)["target"]["triple"])')"; \
	mkdir -p api; \
	for module in $(API_MODULES); do \
		$(SWIFT_API_DIGESTER) -dump-sdk -avoid-tool-args -module $$module -target "$$triple" $$flags \
			-o api/$$module.json; \
		echo "api-baseline: wrote api/$$module.json"; \
	done

# A build of its own (coverage flags would otherwise rebuild .build/debug both ways). Old raw
# profiles are removed first: SwiftPM merges every one it finds.
coverage: deps python-deps
	rm -rf $(COVERAGE_PATH)/*/debug/codecov
	$(SWIFT) test --enable-code-coverage --scratch-path $(COVERAGE_PATH) $(SWIFT_TEST_FLAGS)
	@python3 scripts/coverage-table.py "$$($(SWIFT) test --show-codecov-path --scratch-path $(COVERAGE_PATH))" \
		Sources/RunLoopKit $(COVERAGE_PATH)/RunLoopKit.md

format:
	$(SWIFT) format --in-place --recursive Sources Tests Examples Package.swift $(BENCH_PACKAGE)/Sources \
		$(BENCH_PACKAGE)/Tests $(BENCH_PACKAGE)/Package.swift

lint:
	$(SWIFT) format lint --recursive Sources Tests Examples $(BENCH_PACKAGE)/Sources $(BENCH_PACKAGE)/Tests

clean:
	$(SWIFT) package clean
	rm -rf .build $(BENCH_PACKAGE)/.build
