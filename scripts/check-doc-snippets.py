#!/usr/bin/env python3
"""Checks that every ```swift block of the DocC articles is compiled and run by a test.

Each block of Sources/RunLoopKit/RunLoopKit.docc/*.md must appear, line for line, in
Tests/RunLoopKitTests/DocumentationTests.swift, which runs it and checks what the article says
it does. Lines are compared without their indentation and with runs of spaces collapsed (so
`swift format` may re-indent the test file); blank lines are ignored.

Usage: scripts/check-doc-snippets.py [catalog-dir] [test-file]
"""

import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
catalog = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else root / "Sources/RunLoopKit/RunLoopKit.docc"
test_file = pathlib.Path(sys.argv[2]) if len(sys.argv) > 2 else root / "Tests/RunLoopKitTests/DocumentationTests.swift"


def normalized(lines):
    return [re.sub(r"\s+", " ", line.strip()) for line in lines if line.strip()]


def contains(haystack, needle):
    width = len(needle)
    return any(haystack[i : i + width] == needle for i in range(len(haystack) - width + 1))


tested = normalized(test_file.read_text().splitlines())
blocks = 0
missing = []
for article in sorted(catalog.glob("*.md")):
    lines = article.read_text().splitlines()
    index = 0
    while index < len(lines):
        if lines[index].strip() == "```swift":
            start = index + 1
            end = start
            while end < len(lines) and lines[end].strip() != "```":
                end += 1
            blocks += 1
            if not contains(tested, normalized(lines[start:end])):
                missing.append(f"{article.relative_to(root)}:{start}")
            index = end
        index += 1

if missing:
    print(f"check-doc-snippets: {len(missing)} of {blocks} Swift blocks are not in {test_file.relative_to(root)}:")
    for entry in missing:
        print("  " + entry)
    sys.exit(1)
print(f"check-doc-snippets: all {blocks} Swift blocks of the articles are run by {test_file.name}")
