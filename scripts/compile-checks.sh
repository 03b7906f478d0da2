#!/usr/bin/env bash
# The compile-time checks of the handler rules: small programs in Tests/CompileChecks, each
# compiled in Swift 6 mode against the library as a user's program would be (top-level code
# included). Usage: scripts/compile-checks.sh BIN-PATH (the output of `swift build --show-bin-path`
# after `swift build`).
#
#   racy-*.swift  must fail to compile, with the diagnostic its `// expect-error:` line names
#   reject-*.swift  the same, for a call that compiled would not do what it says (not a race)
#   trap-*.swift  must compile, then stop with the message its `// expect-trap:` line names
#                 before the handler it guards runs
#   safe-*.swift  must compile without a warning and run to completion (exit status 0)
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin="$(cd "$1" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

flags=(-swift-version 6 -I "$bin/Modules")
for dir in Modulemaps/*/; do flags+=(-I "$PWD/${dir%/}"); done
for map in "$bin"/*.build/module.modulemap; do [ -e "$map" ] && flags+=(-Xcc "-fmodule-map-file=$map"); done
objects=("$bin"/RunLoopKit.build/*.o "$bin"/CPlatform.build/*.o)
libs=(-levent_core -lssl -lcrypto)

check() {
    local file="$1" name log expected status
    name="$(basename "$file" .swift)"
    log="$work/$name.log"
    case "$name" in
    racy-* | reject-*)
        expected="$(sed -n 's#^// expect-error: ##p' "$file")"
        if swiftc "${flags[@]}" -emit-sil -o /dev/null "$file" >"$log" 2>&1; then
            echo "FAIL $name: compiled, but it must not (expected: $expected)"
            return 1
        fi
        if ! grep -qF -- "$expected" "$log"; then
            echo "FAIL $name: did not compile, but not for the expected reason ($expected):"
            grep 'error:' "$log" | head -n 5
            return 1
        fi
        ;;
    trap-* | safe-*)
        if ! swiftc "${flags[@]}" "$file" "${objects[@]}" "${libs[@]}" -o "$work/$name" >"$log" 2>&1; then
            echo "FAIL $name: does not compile:"
            grep 'error:' "$log" | head -n 5
            return 1
        fi
        if [[ "$name" == safe-* ]] && grep -q 'warning:' "$log"; then
            echo "FAIL $name: compiles with a warning:"
            grep 'warning:' "$log" | head -n 5
            return 1
        fi
        # In a subshell whose stderr is dropped: the shell's own note of a crash is not the program's.
        (SWIFT_BACKTRACE=enable=no timeout 60 "$work/$name" >"$log.run" 2>&1; exit $?) 2>/dev/null
        status=$?
        if [[ "$name" == safe-* ]]; then
            if [ "$status" -ne 0 ]; then
                echo "FAIL $name: exit status $status:"
                tail -n 5 "$log.run"
                return 1
            fi
        else
            expected="$(sed -n 's#^// expect-trap: ##p' "$file")"
            if [ "$status" -eq 0 ] || [ "$status" -eq 124 ] || ! grep -qF -- "$expected" "$log.run"; then
                echo "FAIL $name: exit status $status, expected a stop with: $expected"
                tail -n 5 "$log.run"
                return 1
            fi
        fi
        ;;
    *)
        echo "FAIL $name: not racy-, reject-, trap- or safe-"
        return 1
        ;;
    esac
    echo "ok   $name"
}

failed=0
for file in Tests/CompileChecks/*.swift; do
    check "$file" || failed=$((failed + 1))
done
total=$(ls Tests/CompileChecks/*.swift | wc -l)
if [ "$failed" -ne 0 ]; then
    echo "compile-checks: $failed of $total programs did not behave as expected"
    exit 1
fi
echo "compile-checks: all $total programs behave as expected"
