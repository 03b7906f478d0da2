#!/usr/bin/env python3
"""Prints the line coverage of one source directory from an llvm-cov JSON export.

Usage: scripts/coverage-table.py EXPORT.json SOURCE-DIR [MARKDOWN-OUT]

EXPORT.json is what `swift test --enable-code-coverage` writes (its path:
`swift test --show-codecov-path`). Prints one row per file under SOURCE-DIR, least covered
first, then the total of those files; with MARKDOWN-OUT, also writes the table as Markdown.
"""

import json
import os
import sys


def main(export, source_dir, markdown_out=None):
    source_dir = os.path.abspath(source_dir).rstrip("/") + "/"
    with open(export) as file:
        data = json.load(file)["data"][0]
    rows = []
    for entry in data["files"]:
        name = entry["filename"]
        if not name.startswith(source_dir):
            continue
        lines = entry["summary"]["lines"]
        rows.append((name[len(source_dir) :], lines["count"], lines["count"] - lines["covered"]))
    if not rows:
        print(f"coverage-table: no file under {source_dir} in {export}", file=sys.stderr)
        return 1
    rows.sort(key=lambda row: (1 - row[2] / row[1] if row[1] else 1, row[0]))
    total = sum(row[1] for row in rows)
    missed = sum(row[2] for row in rows)

    def percent(count, missed):
        return f"{100 * (count - missed) / count:.2f} %" if count else "-"

    width = max(len(row[0]) for row in rows + [("TOTAL", 0, 0)])
    print(f"{'file':<{width}}  {'lines':>6}  {'missed':>6}  {'covered':>8}")
    for name, count, miss in rows:
        print(f"{name:<{width}}  {count:>6}  {miss:>6}  {percent(count, miss):>8}")
    print(f"{'TOTAL':<{width}}  {total:>6}  {missed:>6}  {percent(total, missed):>8}")
    if markdown_out:
        with open(markdown_out, "w") as out:
            out.write("| file | lines | missed | covered |\n|---|---:|---:|---:|\n")
            for name, count, miss in rows:
                out.write(f"| {name} | {count} | {miss} | {percent(count, miss)} |\n")
            out.write(f"| **total** | {total} | {missed} | {percent(total, missed)} |\n")
    return 0


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
