#!/usr/bin/env python3
"""Checks that every relative link in the repository's Markdown files resolves.

A link to a file must name a file or directory of the repository; a link with a fragment
(`#anchor`, alone or after a Markdown file) must name a heading of that file, slugged as GitHub
does (lowercase; punctuation other than `-` and `_` dropped; spaces to `-`; a repeated heading
gets `-1`, `-2`, ...). Links to other sites are not followed: this runs offline.

Usage: python3 scripts/check-doc-links.py [FILE.md ...]   (default: every tracked *.md)
Exits 1 and lists each broken link as `file:line: target (why)`.
"""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# [text](target) and [text](target "title"); images too. Reference-style links are not used here.
LINK = re.compile(r"\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def slug(text: str) -> str:
    # What GitHub renders: inline code and emphasis markers vanish, links keep their text.
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def lines_outside_fences(path: str):
    fenced = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            if not fenced:
                yield number, line


def anchors(path: str, cache={}) -> set:
    if path not in cache:
        seen: dict = {}
        found = set()
        for _, line in lines_outside_fences(path):
            match = HEADING.match(line)
            if not match:
                continue
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
        cache[path] = found
    return cache[path]


def tracked_markdown() -> list:
    out = subprocess.run(
        ["git", "ls-files", "*.md"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    return [os.path.join(ROOT, p) for p in out.split()]


def check(path: str) -> list:
    problems = []
    for number, line in lines_outside_fences(path):
        # Inline code can show link syntax without being a link.
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
                continue
            file_part, _, fragment = target.partition("#")
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            where = f"{os.path.relpath(path, ROOT)}:{number}: {target}"
            if not os.path.exists(resolved):
                problems.append(f"{where} (no such file)")
            elif file_part and not resolved.startswith(ROOT + os.sep) and resolved != ROOT:
                problems.append(f"{where} (outside the repository)")
            elif fragment and resolved.endswith(".md") and fragment not in anchors(resolved):
                problems.append(f"{where} (no heading with that anchor in {os.path.relpath(resolved, ROOT)})")
    return problems


def main() -> int:
    files = [os.path.abspath(p) for p in sys.argv[1:]] or tracked_markdown()
    problems = [p for f in files for p in check(f)]
    for problem in problems:
        print(problem)
    print(f"{len(files)} Markdown files, {len(problems)} broken links", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
