"""The documentation's code blocks and links, read from README.md, the project files and docs/**/*.md.

A block is *runnable* when the line before its opening fence is `<!-- runnable -->`; its language is `sh`
(run with POSIX `sh -e`) or `python` (run with the test's Python). tests/docs/test_examples.py runs them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNNABLE = "<!-- runnable -->"
_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<lang>[\w+-]*)")
# [text](target) and ![alt](target); the target ends at whitespace (a title may follow) or ")".
_LINK = re.compile(r"!?\[[^\]]*\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    runnable: bool

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def documents() -> list[Path]:
    """README.md, CHANGELOG.md, SECURITY.md and every page under docs/."""
    top = [ROOT / name for name in ("README.md", "CHANGELOG.md", "SECURITY.md") if (ROOT / name).exists()]
    return top + sorted((ROOT / "docs").rglob("*.md"))


def blocks(path: Path) -> list[Block]:
    found: list[Block] = []
    lines = path.read_text().splitlines()
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        previous = next((line.strip() for line in reversed(lines[:index]) if line.strip()), "")
        body: list[str] = []
        end = index + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            body.append(lines[end][indent:] if lines[end][:indent].isspace() else lines[end])
            end += 1
        found.append(Block(path, index + 1, opening["lang"], "\n".join(body) + "\n", previous == RUNNABLE))
        index = end + 1
    return found


def all_blocks() -> list[Block]:
    return [block for path in documents() for block in blocks(path)]


def links(path: Path) -> list[tuple[int, str]]:
    """(line, target) of every Markdown link and image outside code blocks."""
    fenced = {line for block in blocks(path) for line in range(block.line, block.line + block.code.count("\n") + 2)}
    found = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if number in fenced:
            continue
        text = re.sub(r"`[^`]*`", "", line)  # code spans are not links
        found.extend((number, match["target"]) for match in _LINK.finditer(text))
    return found


def anchors(path: Path) -> set[str]:
    """The anchors GitHub makes of the page's headings: lower case, punctuation dropped, spaces as hyphens."""
    fenced = {line for block in blocks(path) for line in range(block.line, block.line + block.code.count("\n") + 2)}
    found: set[str] = set()
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*$", line)
        if heading is None or number in fenced:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading[1].lower()).replace(" ", "-")
        candidate, n = slug, 0
        while candidate in found:  # a repeated heading gets -1, -2, ...
            n += 1
            candidate = f"{slug}-{n}"
        found.add(candidate)
    return found
