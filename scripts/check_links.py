"""Check that every relative link and image in Markdown files resolves: the file or folder exists, and
a `#fragment` names a heading of the target (GitHub's anchors). Prints each broken one; exit 1 if any.

    python scripts/check_links.py                  # README.md and docs/*.md
    python scripts/check_links.py results/README.md
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# [text](target) and ![alt](target); an optional "title" after the target is dropped
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
IMG_SRC = re.compile(r"<img\s[^>]*src=\"([^\"]+)\"")
FENCE = re.compile(r"^\s*(```|~~~)")


def prose_lines(text: str):
    """(line number, line) outside fenced code blocks: a link shown as code is not a link."""
    fenced = False
    for n, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield n, re.sub(r"`[^`]*`", "", line)   # nor is one inside inline code


def anchors(md: Path) -> set[str]:
    """The heading anchors GitHub makes: lower case, punctuation dropped, spaces to '-', repeats -1, -2."""
    seen: dict[str, int] = {}
    out = set()
    fenced = False
    for line in md.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        m = None if fenced else re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        k = seen.get(slug, 0)
        seen[slug] = k + 1
        out.add(slug if k == 0 else f"{slug}-{k}")
    return out


def _shown(p: Path) -> str:
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)


def broken_links(md: Path) -> list[str]:
    out = []
    for n, line in prose_lines(md.read_text(encoding="utf-8")):
        for target in LINK.findall(line) + IMG_SRC.findall(line):
            if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):   # http:, https:, mailto:
                continue
            path, _, frag = target.partition("#")
            dest = (md.parent / path).resolve() if path else md
            where = f"{_shown(md)}:{n}: {target}"
            if not dest.exists():
                out.append(f"{where}: no such file")
            elif frag and dest.suffix == ".md" and frag not in anchors(dest):
                out.append(f"{where}: no heading #{frag} in {_shown(dest)}")
    return out


def default_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def main(argv: list[str]) -> int:
    files = [Path(a).resolve() for a in argv] or default_files()
    bad = [b for f in files for b in broken_links(f)]
    for b in bad:
        print(b)
    print(f"{len(bad)} broken link(s) in {len(files)} file(s)", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
