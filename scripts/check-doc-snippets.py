#!/usr/bin/env python3
"""Checks that the Swift code of the documentation is compiled and run by tests.

Every ```swift block of these documents must appear, line for line, in a file that runs it and
checks what the text around it says it does:

- the DocC articles, Sources/RunLoopKit/RunLoopKit.docc/*.md: DocumentationTests.swift, or the
  file DOCC names for an article;
- docs/Guide.md, chapter by chapter (a `## ` heading with its `###` sections): the files GUIDE
  names, one test file per concept (and runloop-mainqueue-probe for the `main.swift` that needs
  the process's main thread); a chapter with Swift code and no entry there fails the check;
- README.md: ReadmeTests.swift.

A complete program may instead be run as a program: the main.swift of an executable of Examples/
(PROGRAMS names them), which holds the block as top-level code, run as a child process on its main
thread by the tests (MainLoopProgramTests, ServerProgramTests, ChildProcessProgramTests,
StandardInputProgramTests).

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
one: the Guide's `@main` entry point (a test cannot be a program's entry point;
runloop-mainqueue-probe --main-executor does the same as a `main.swift`). Keep it that way: every
other block runs.

Usage: scripts/check-doc-snippets.py
"""

import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
TESTS = "Tests/RunLoopKitTests/"

# DocC articles whose code a file of its own runs (the others: DocumentationTests.swift).
DOCC = {
    "WritingAServer.md": [TESTS + "DocumentationServerTests.swift"],
}

# docs/Guide.md's chapters, and the files that run their code.
GUIDE = {
    "What a loop is": [TESTS + "GuideLoopTests.swift"],
    "Running a loop": [TESTS + "GuideLoopTests.swift"],
    "Phases and observers": [TESTS + "GuideLoopTests.swift"],
    "Modes": [TESTS + "GuideLoopTests.swift"],
    "Timers": [TESTS + "GuideTimerTests.swift"],
    "Missed-fire policies": [TESTS + "GuideTimerTests.swift"],
    "Frame links": [TESTS + "GuideTimerTests.swift"],
    "Custom sources": [TESTS + "GuideSourceTests.swift"],
    "Blocks from any thread": [TESTS + "GuideSourceTests.swift"],
    "Background threads": [TESTS + "GuideSourceTests.swift"],
    "Descriptors and sockets": [TESTS + "GuideSourceTests.swift"],
    "Message ports": [TESTS + "GuideSourceTests.swift"],
    "Signals": [TESTS + "GuideSourceTests.swift"],
    "Loop groups for servers": [TESTS + "GuideSourceTests.swift"],
    "Work off the loop": [TESTS + "GuideWorkTests.swift"],
    "Servers": [TESTS + "GuideServerTests.swift"],
    "TLS": [TESTS + "GuideTLSTests.swift"],
    "Datagrams": [TESTS + "DatagramTests.swift"],
    "Swift concurrency and Dispatch": [TESTS + "GuideConcurrencyTests.swift"],
    "Stopping and waking a loop": [TESTS + "GuideLoopTests.swift"],
    "Nested runs": [TESTS + "GuideLoopTests.swift"],
    "Watching a loop: metrics, hangs and traces": [TESTS + "GuideVisibilityTests.swift"],
    "Thread rules": [TESTS + "GuideThreadRulesTests.swift"],
}


# The programs of Examples/ (Examples/<name>/main.swift) that run blocks of a document: by DocC
# article, by chapter of docs/Guide.md, and README.md's. A block may be run by one of these or by
# the test files above.
PROGRAMS = {
    "RunLoopKit.md": ["overview"],
    "LoopsAndModes.md": ["overview", "observer", "modes", "import-mode", "modal"],
    "Timers.md": ["timers", "tolerance", "burst", "schedule", "frame-link"],
    "SourcesAndPorts.md": ["perform", "port", "pipe-reader", "signal"],
    "WorkOffTheLoop.md": ["child-exit", "supervisor"],
    "Concurrency.md": ["isolated-port", "actor", "executor-preference"],
    "Visibility.md": ["metrics", "hang-monitor", "tracer", "instrument"],
    "WritingAServer.md": ["chat-server"],
    "README.md": ["readme"],
    # docs/Guide.md
    "Background threads": ["background-thread"],
    "Descriptors and sockets": ["stdin-lines"],
    "Work off the loop": ["sort"],
    "Servers": ["echo"],
    # The main queue's `main.swift` needs the process's main thread.
    "Swift concurrency and Dispatch": ["main-queue"],
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
    """Yields (line number of the block's first line, chapter, lines, marked not run)."""
    lines = document.read_text().splitlines()
    chapter = None
    index = 0
    while index < len(lines):
        line = lines[index].strip()
        if line.startswith("## "):
            chapter = line[3:].strip()
        elif line.startswith("```"):
            end = index + 1
            while end < len(lines) and lines[end].strip() != "```":
                end += 1
            if line == "```swift":
                yield index + 2, chapter, lines[index + 1 : end], marked_not_run(lines, index)
            index = end
        index += 1


def runners(document, chapter):
    """The files that may run a block of `document` in `chapter`, or None if there are none."""
    if document.parent.name == "RunLoopKit.docc":
        tests = DOCC.get(document.name, [TESTS + "DocumentationTests.swift"])
    elif document.name == "README.md":
        tests = [TESTS + "ReadmeTests.swift"]
    else:
        tests = GUIDE.get(chapter)
    key = chapter if document.name == "Guide.md" else document.name
    programs = [f"Examples/{name}/main.swift" for name in PROGRAMS.get(key, [])]
    if tests is None and not programs:
        return None
    return (tests or []) + programs


documents = sorted((root / "Sources/RunLoopKit/RunLoopKit.docc").glob("*.md"))
documents += [root / "docs/Guide.md", root / "README.md"]
contents = {}
checked = 0
missing = []
skipped = []
for document in documents:
    for number, chapter, lines, not_run in blocks(document):
        place = f"{document.relative_to(root)}:{number}"
        if not_run:
            skipped.append(place)
            continue
        files = runners(document, chapter)
        if files is None:
            missing.append(f'{place} (chapter "{chapter}" has no test file in GUIDE)')
            continue
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
print(f"check-doc-snippets: all {checked} Swift blocks of the articles, docs/Guide.md and README.md are run by tests")
for place in skipped:
    print(f"  marked not run: {place}")
