#!/usr/bin/env python3
"""Checks that the Swift code of the documentation is compiled and run by tests.

Every ```swift block of these documents must appear, line for line, in the test file named for it
(in Tests/RunLoopKitTests), which runs the block and checks what the text around it says it does:

- the DocC articles, Sources/RunLoopKit/RunLoopKit.docc/*.md: DocumentationTests.swift;
- docs/Guide.md, chapter by chapter (a `## ` heading and its `###` sections): the file GUIDE names
  for the chapter;
- README.md: ReadmeTests.swift.

Lines are compared without their indentation and with runs of spaces collapsed (so `swift format`
may re-indent a test file and its end-of-line comments); blank lines are ignored. Two things a
test file cannot hold verbatim are allowed for:

- the `import` lines that open a block (a complete program) cannot stand inside a function: each
  must be one of the test file's own imports;
- a comment line starting with `// ...` stands for the reader's own code: the test may put its own
  there, so the lines before it (the comment included) and the lines after it must each appear
  line for line, in that order, with anything in between.

A block that cannot run in a test is marked by the line `<!-- not run: why -->` just before its
```swift line, and is then skipped. Such exceptions are kept few: the script names each one when
it passes, and every other block of a checked document must be in its test file.

Usage: scripts/check-doc-snippets.py
"""

import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
tests = root / "Tests/RunLoopKitTests"

# docs/Guide.md's chapters whose blocks are checked, and the test file of each.
GUIDE = {
    "What a loop is": "GuideLoopTests.swift",
    "Running a loop": "GuideLoopTests.swift",
    "Phases and observers": "GuideLoopTests.swift",
    "Modes": "GuideLoopTests.swift",
    "Stopping and waking a loop": "GuideLoopTests.swift",
    "Nested runs": "GuideLoopTests.swift",
    "Timers": "GuideTimerTests.swift",
    "Missed-fire policies": "GuideTimerTests.swift",
    "Frame links": "GuideTimerTests.swift",
    "Custom sources": "GuideSourceTests.swift",
    "Blocks from any thread": "GuideSourceTests.swift",
    "Background threads": "GuideSourceTests.swift",
    "Descriptors and sockets": "GuideSourceTests.swift",
    "Message ports": "GuideSourceTests.swift",
    "Signals": "GuideSourceTests.swift",
    "Loop groups for servers": "GuideSourceTests.swift",
    "Work off the loop": "GuideWorkTests.swift",
    "Servers": "GuideServerTests.swift",
}

NOT_RUN = re.compile(r"^<!-- not run: .+ -->$")


def normalized(lines):
    return [re.sub(r"\s+", " ", line.strip()) for line in lines if line.strip()]


def find(haystack, needle, start):
    """The index of the first occurrence of `needle` in `haystack` at `start` or after, or -1."""
    width = len(needle)
    for index in range(start, len(haystack) - width + 1):
        if haystack[index : index + width] == needle:
            return index
    return -1


def pieces(body):
    """`body` cut after each `// ...` line (code left out): the test puts its own code there."""
    cut = [[]]
    for line in body:
        cut[-1].append(line)
        if line.startswith("// ..."):
            cut.append([])
    return [piece for piece in cut if piece]


def runs(tested, body):
    """Whether `body`'s pieces are in `tested`, each line for line, in order."""
    position = 0
    for piece in pieces(body):
        found = find(tested, piece, position)
        if found < 0:
            return False
        position = found + len(piece)
    return True


def blocks(document):
    """Yields (line number of the first line, chapter, lines, marked not run) for each ```swift block."""
    lines = document.read_text().splitlines()
    chapter = None
    index = 0
    while index < len(lines):
        line = lines[index].strip()
        if line.startswith("## "):
            chapter = line[3:].strip()
        elif line.startswith("```"):
            start = index + 1
            end = start
            while end < len(lines) and lines[end].strip() != "```":
                end += 1
            if line == "```swift":
                marked = index > 0 and NOT_RUN.match(lines[index - 1].strip()) is not None
                yield start + 1, chapter, lines[start:end], marked
            index = end
        index += 1


def test_file_for(document, chapter):
    if document.parent.name == "RunLoopKit.docc":
        return "DocumentationTests.swift"
    if document.name == "README.md":
        return "ReadmeTests.swift"
    return GUIDE.get(chapter)


documents = sorted((root / "Sources/RunLoopKit/RunLoopKit.docc").glob("*.md"))
documents += [root / "docs/Guide.md", root / "README.md"]
test_lines = {}
checked = 0
missing = []
skipped = []
unchecked = {}
for document in documents:
    for number, chapter, lines, marked in blocks(document):
        place = f"{document.relative_to(root)}:{number}"
        if marked:
            skipped.append(place)
            continue
        name = test_file_for(document, chapter)
        if name is None:
            unchecked.setdefault(f"{document.relative_to(root)}, \"{chapter}\"", []).append(place)
            continue
        if name not in test_lines:
            test_lines[name] = normalized((tests / name).read_text().splitlines())
        tested = test_lines[name]
        body = normalized(lines)
        imports = []
        while body and body[0].startswith("import "):
            imports.append(body.pop(0))
        checked += 1
        if not all(line in tested for line in imports) or not runs(tested, body):
            missing.append(f"{place} (in {name})")

if missing:
    print(f"check-doc-snippets: {len(missing)} of {checked} Swift blocks are not in their test files:")
    for entry in missing:
        print("  " + entry)
    sys.exit(1)
print(f"check-doc-snippets: all {checked} Swift blocks checked are run by their test files")
for place in skipped:
    print(f"  not run (marked): {place}")
for chapter, places in unchecked.items():
    print(f"  not checked: {chapter}, {len(places)} blocks")
