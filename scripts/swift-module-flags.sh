#!/usr/bin/env bash
# Prints the flags that let swift symbolgraph-extract and swift-api-digester load the package's
# modules from a build: its Swift modules, the system-library module maps under Modulemaps/, and
# the module maps SwiftPM generates for the C targets. Usage: scripts/swift-module-flags.sh BIN-PATH
# (the output of `swift build --show-bin-path`).
set -euo pipefail

bin="$1"
flags=(-I "$bin/Modules")
for dir in Modulemaps/*/; do
    flags+=(-I "${dir%/}")
done
for map in "$bin"/*.build/module.modulemap; do
    [ -e "$map" ] && flags+=(-Xcc "-fmodule-map-file=$map")
done
echo "${flags[@]}"
