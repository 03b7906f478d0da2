#!/usr/bin/env python3
"""Lists the public declarations of a module that have no `///` comment of their own.

Reads the symbol graph JSON files given on the command line (from `swift symbolgraph-extract`
or `-emit-symbol-graph`). A symbol counts as documented when its doc comment was written on the
declaration itself: the comment ends just above the declaration, in the same file. A comment
inherited from a protocol requirement (the standard library's `description`, `==`, `rawValue`,
or the module's own protocols) does not count. Members the compiler synthesizes
(`::SYNTHESIZED::`, such as `!=` or an option set's `union`) are skipped: they have no
declaration in the sources.

Exits with status 1, naming each undocumented declaration with its file and line, if there is
any; prints the count of documented declarations otherwise.

With `--landing PAGE`, also names (as a note, without failing) the top-level types of the first
graph's module that no ``Symbol`` link of PAGE, the catalog's landing page, curates: DocC
still lists them, in groups of its own, but they deserve a place in a topic group.
"""

import json
import re
import sys
from urllib.parse import unquote, urlparse

# Lines allowed between the end of a doc comment and its declaration (attributes such as
# `@discardableResult`, a wrapped attribute list).
MAX_GAP = 6


def own_doc(symbol):
    doc = symbol.get("docComment")
    location = symbol.get("location")
    if not doc or not location or not doc.get("lines"):
        return False
    if doc.get("uri") != location.get("uri"):
        return False
    ranges = [line.get("range") for line in doc["lines"] if line.get("range")]
    if not ranges:
        return False
    end = max(r["end"]["line"] for r in ranges)
    declared = location["position"]["line"]
    return declared - MAX_GAP <= end < declared


def uncurated_types(path, landing):
    with open(path) as file:
        graph = json.load(file)
    with open(landing) as file:
        curated = set(re.findall(r"``([^`]+)``", file.read()))
    kinds = {"swift.class", "swift.struct", "swift.enum", "swift.protocol", "swift.actor", "swift.typealias"}
    return sorted(
        symbol["pathComponents"][0]
        for symbol in graph["symbols"]
        if symbol["kind"]["identifier"] in kinds
        and len(symbol["pathComponents"]) == 1
        and symbol.get("accessLevel") in ("public", "open")
        and symbol["pathComponents"][0] not in curated
    )


def main(paths):
    landing = None
    if len(paths) > 1 and paths[0] == "--landing":
        landing, paths = paths[1], paths[2:]
    if landing and paths:
        missing_types = uncurated_types(paths[0], landing)
        if missing_types:
            print(f"doc-coverage: note: types in no topic group of {landing}: {', '.join(missing_types)}")
    documented = 0
    missing = []
    seen = set()
    for path in paths:
        with open(path) as file:
            graph = json.load(file)
        for symbol in graph["symbols"]:
            precise = symbol["identifier"]["precise"]
            # Synthesized members have no declaration in the sources, and no location.
            if "::SYNTHESIZED::" in precise or precise in seen or "location" not in symbol:
                continue
            seen.add(precise)
            if symbol.get("accessLevel") not in ("public", "open"):
                continue
            # Default implementations of a protocol appear once per conforming type too, with
            # the same location: count each declaration once.
            location = symbol.get("location", {})
            key = (location.get("uri"), location.get("position", {}).get("line"), symbol["names"]["title"])
            if key in seen:
                continue
            seen.add(key)
            if own_doc(symbol):
                documented += 1
            else:
                file = unquote(urlparse(location.get("uri", "")).path)
                line = location.get("position", {}).get("line", -1) + 1
                missing.append(f"{file}:{line}: {'.'.join(symbol['pathComponents'])} ({symbol['kind']['displayName']})")
    if missing:
        print(f"doc-coverage: {len(missing)} public declaration(s) without a /// comment:")
        for entry in sorted(missing):
            print("  " + entry)
        return 1
    print(f"doc-coverage: all {documented} public declarations have a /// comment")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
