"""A transport that answers `poc check`'s Slurm commands with what the local Slurm cluster's login node
answered (tests/fixtures/check/slurm.json, re-recorded by tests/fixtures/check/record.py): shared by the
Slurm checks' tests and the `poc check` command line's."""
from __future__ import annotations

import json

from harness.transports import Result
from support.paths import FIXTURES

REC = json.loads((FIXTURES / "check" / "slurm.json").read_text())


def recorded(argv0: list[str], case: str | None = None) -> dict:
    for r in REC["runs"]:
        if case is not None and r.get("case") == case:
            return r
        if case is None and r["argv"] == argv0:
            return r
    raise KeyError(argv0, case)


class Replay:
    """A transport answering each command with what the real login node answered; `answers` picks
    another recorded answer for a command (the same command on a differently set up cluster)."""
    name = "replay"

    def __init__(self, answers: dict[tuple[str, ...], dict] | None = None):
        self.answers = answers or {}
        self.calls: list[tuple[list[str], str | None]] = []

    def run(self, argv, *, input=None, env=None, timeout=60, check=True):
        self.calls.append((list(argv), input))
        key = tuple(argv)
        r = self.answers.get(key) or recorded(list(argv))
        return Result(key, r["rc"], r["stdout"], r["stderr"])

    def describe(self):
        return {"transport": "replay", "host": "login", "port": 22}

    def close(self):
        pass


TEST_ONLY = ("sbatch", "--test-only")
