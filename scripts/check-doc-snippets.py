#!/usr/bin/env python3
"""Checks that the Swift code of the documentation is compiled and run by tests.

Every ```swift block of these documents must appear, line for line, in a file that runs it and
checks what the text around it says it does:

- the DocC articles, Sources/RunLoopKit/RunLoopKit.docc/*.md (the user guide): the files DOCC
  names for the article, one test file per concept (DocumentationTests.swift for an article it
  does not name);
- README.md: ReadmeTests.swift.

A complete program may instead be run as a program: the main.swift of an executable of Examples/
(PROGRAMS names them), which holds the block as top-level code, run as a child process on its main
thread by the tests (MainLoopProgramTests, ServerProgramTests, ChildProcessProgramTests,
StandardInputProgramTests, FileWatchProgramTests).

(Test files are in Tests/RunLoopKitTests.) Lines are compared without their indentation and with
runs of spaces collapsed (so `swift format` may re-indent a file and its end-of-line comments);
blank lines are ignored. Two things a test cannot hold verbatim are allowed for:

- the `import` lines that open a block (a complete program) cannot stand inside a function: each
  must be one of the file's own imports;
- a comment line starting with `// ...` stands for the reader's own code: the test may put its own
  there, so the lines before it (the comment included) and the lines after it must each appear
  line for line, in that order, with anything in between.

A block that no test can run is marked by an HTML comment starting `<!-- not run:`, saying why, on
the lines just before its ```swift line; it is skipped and named when the check passes. There is
one: the `@main` entry point of Concurrency.md (a test cannot be a program's entry point;
runloop-mainqueue-probe --main-executor does the same as a `main.swift`). Keep it that way: every
other block runs.

Usage: scripts/check-doc-snippets.py
"""

import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
TESTS = "Tests/RunLoopKitTests/"

# The DocC articles, and the files that run their code (DocumentationTests.swift for the others).
DOCC = {
    "LoopsAndModes.md": [
        TESTS + "DocumentationTests.swift",
        TESTS + "GuideLoopTests.swift",
        TESTS + "GuideSourceTests.swift",
    ],
    "Timers.md": [TESTS + "DocumentationTests.swift", TESTS + "GuideTimerTests.swift"],
    "SourcesAndPorts.md": [TESTS + "DocumentationTests.swift", TESTS + "GuideSourceTests.swift"],
    "WorkOffTheLoop.md": [TESTS + "DocumentationTests.swift", TESTS + "GuideWorkTests.swift"],
    "WritingAServer.md": [TESTS + "DocumentationServerTests.swift", TESTS + "GuideServerTests.swift"],
    "TLSConnections.md": [TESTS + "GuideTLSTests.swift"],
    "DatagramSockets.md": [TESTS + "DatagramTests.swift"],
    "InsideAnotherLoop.md": [TESTS + "EmbeddingTests.swift"],
    "CommandLineTools.md": [TESTS + "FileWatchTests.swift"],
    "Concurrency.md": [TESTS + "DocumentationTests.swift", TESTS + "GuideConcurrencyTests.swift"],
    "Visibility.md": [TESTS + "DocumentationTests.swift", TESTS + "GuideVisibilityTests.swift"],
}


# The programs of Examples/ (Examples/<name>/main.swift) that run blocks of a document: by DocC
# article, and README.md's. A block may be run by one of these or by the test files above.
PROGRAMS = {
    "RunLoopKit.md": ["overview"],
    "LoopsAndModes.md": ["overview", "observer", "modes", "import-mode", "modal", "background-thread"],
    "Timers.md": ["timers", "tolerance", "burst", "schedule", "frame-link"],
    "SourcesAndPorts.md": ["perform", "port", "pipe-reader", "signal", "stdin-lines"],
    "WorkOffTheLoop.md": ["child-exit", "supervisor", "sort"],
    "Concurrency.md": ["isolated-port", "actor", "executor-preference", "main-queue"],
    "Visibility.md": ["metrics", "hang-monitor", "tracer", "instrument"],
    "WritingAServer.md": ["chat-server", "echo", "async-server", "socket-activated"],
    "InsideAnotherLoop.md": ["inside-another-loop"],
    "CommandLineTools.md": ["follow"],
    "README.md": ["readme"],
}


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


def runs(tested, block):
    """Whether `tested` (normalized lines of a file) holds `block` (normalized), as described above."""
    body = list(block)
    while body and body[0].startswith("import "):
        if body.pop(0) not in tested:
            return False
    position = 0
    for piece in pieces(body):
        found = find(tested, piece, position)
        if found < 0:
            return False
        position = found + len(piece)
    return True


def marked_not_run(lines, fence):
    """Whether the lines just before `lines[fence]` are a `<!-- not run: ... -->` comment."""
    end = fence - 1
    if end < 0 or not lines[end].strip().endswith("-->"):
        return False
    start = end
    while start > 0 and "<!--" not in lines[start]:
        start -= 1
    return lines[start].strip().startswith("<!-- not run:")


def blocks(document):
    """Yields (line number of the block's first line, lines, marked not run)."""
    lines = document.read_text().splitlines()
    index = 0
    while index < len(lines):
        line = lines[index].strip()
        if line.startswith("```"):
            end = index + 1
            while end < len(lines) and lines[end].strip() != "```":
                end += 1
            if line == "```swift":
                yield index + 2, lines[index + 1 : end], marked_not_run(lines, index)
            index = end
        index += 1


def runners(document):
    """The files that may run a block of `document`."""
    if document.name == "README.md":
        tests = [TESTS + "ReadmeTests.swift"]
    else:
        tests = DOCC.get(document.name, [TESTS + "DocumentationTests.swift"])
    return tests + [f"Examples/{name}/main.swift" for name in PROGRAMS.get(document.name, [])]


documents = sorted((root / "Sources/RunLoopKit/RunLoopKit.docc").glob("*.md"))
documents += [root / "README.md"]
contents = {}
checked = 0
missing = []
skipped = []
for document in documents:
    for number, lines, not_run in blocks(document):
        place = f"{document.relative_to(root)}:{number}"
        if not_run:
            skipped.append(place)
            continue
        files = runners(document)
        for name in files:
            if name not in contents:
                contents[name] = normalized((root / name).read_text().splitlines())
        checked += 1
        if not any(runs(contents[name], normalized(lines)) for name in files):
            missing.append(f"{place} (in {' or '.join(files)})")

if missing:
    print(f"check-doc-snippets: {len(missing)} of {checked + len(skipped)} Swift blocks are not run by tests:")
    for entry in missing:
        print("  " + entry)
    sys.exit(1)
print(f"check-doc-snippets: all {checked} Swift blocks of the articles and README.md are run by tests")
for place in skipped:
    print(f"  marked not run: {place}")
