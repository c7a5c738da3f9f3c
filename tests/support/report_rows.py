"""report.md read back: a section, a table's line, and the decision summary's table: one entry per
criterion, its lines merged (a criterion's later lines have an empty first cell), each column's filled
cells joined with "; "."""
from __future__ import annotations

import re


def section(md: str, title: str) -> str:
    start = md.index(f"## {title}")
    end = md.find("\n## ", start + 1)
    return md[start:] if end < 0 else md[start:end]


def lines(md: str) -> list[list[str]]:
    """The decision table's lines as cells, header left out, in the order [criterion, evidence, ratio,
    conditions, ahead] (the table shows the conditions second: the tests read it by what each cell holds)."""
    sec = section(md, "Decision summary")
    table = sec.split("\n| criterion", 1)[1].split("\n\n", 1)[0]   # the first table only, not the ledger
    rows = [ln for ln in table.splitlines() if ln.startswith("| ")]
    out = []
    for ln in rows:
        c = [x.strip() for x in re.split(r"(?<!\\)\|", ln)[1:-1]]
        out.append([c[0], c[2], c[3], c[1], c[4]])
    return out


def ledger(md: str) -> list[list[str]]:
    """The conditions ledger's lines as cells: [criterion, condition, Slurm, Kubernetes, the same on both?]."""
    sec = section(md, "Decision summary")
    table = sec.split("### Conditions ledger", 1)[1].split("\n\n", 2)[1]
    return [[x.strip() for x in re.split(r"(?<!\\)\|", ln)[1:-1]] for ln in table.splitlines()[2:]]


def criteria(md: str) -> dict[str, list[str]]:
    """criterion -> [evidence, ratio, conditions, ahead], each merged over the criterion's lines."""
    merged: dict[str, list[list[str]]] = {}
    last = None
    for cells in lines(md):
        if cells[0]:
            last = cells[0]
            merged[last] = [[] for _ in cells[1:]]
        for col, value in zip(merged[last], cells[1:], strict=True):
            if value and value != "–":
                col.append(value)
    return {k: ["; ".join(col) or "–" for col in cols] for k, cols in merged.items()}


def row(table: str, label: str) -> list[str]:
    """The cells of the line of a markdown table whose first cell is label."""
    line = next(x for x in table.splitlines() if x.startswith(f"| {label} |"))
    return [c.strip() for c in line.strip("|").split(" | ")]
