"""A subset of the hostile-config corpus (tests/support/hostile_configs.py) through the in-process
`poc validate` and `poc render -p slurm|k8s`: none may end in a traceback or render an injection.
benchmarks/hostile_configs.py runs the whole corpus in subprocesses and prints the counts.

The judges themselves are checked first: each finds the injection it is for, so a clean verdict
means something."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from support import hostile_configs as hc

from harness.cli import main

CORPUS = hc.corpus()
# a case of every kind, then every 12th of the rest: about 45 cases, each kind and each table covered
SUBSET = list({c.kind: c for c in reversed(CORPUS)}.values()) + CORPUS[::12]


def test_the_corpus_is_large_and_covers_every_table():
    kinds = Counter(c.kind for c in CORPUS)
    assert len(CORPUS) >= 200
    assert set(kinds) == {"injection", "number", "yaml", "wrong type", "unknown key", "reserved", "security choice",
                          "binary junk", "duplicate key", "giant"}
    injected = {c.name.split()[1] for c in CORPUS if c.kind == "injection"}
    assert {p for p, t in hc.fields() if t is str} <= injected, "every string field gets an injection"


def _rendered(tmp_path: Path, platform: str) -> dict[str, str]:
    out = tmp_path / "out"
    assert main(["render", "-p", platform, "--out", str(out)]) == 0
    return {p.name: p.read_text() for p in out.iterdir()}


def test_the_judges_find_an_injection(tmp_path, capsys):
    sbatch = _rendered(tmp_path, "slurm")["job.sbatch"]
    assert hc.sbatch_problems(sbatch) == []
    ran = "the canary command ran"
    assert ran in hc.sbatch_problems(sbatch.replace("set -uo pipefail", f"set -uo pipefail\n{hc.CANARY} x"))
    assert ran in hc.sbatch_problems(sbatch.replace('echo "poc: srun exited $rc"', f'echo "poc: $({hc.CANARY})"'))
    assert any("#SBATCH line" in p for p in hc.sbatch_problems(sbatch.replace("#SBATCH --requeue",
                                                                              "#SBATCH --uid=0")))
    assert any("bash -n" in p for p in hc.sbatch_problems(sbatch + "\nif then\n"))
    k8s = _rendered(tmp_path / "k", "k8s")
    assert hc.k8s_problems(k8s) == []
    assert hc.k8s_problems({**k8s, "jobset.yaml": k8s["jobset.yaml"].replace("kind: JobSet", "kind: Pod")})
    assert hc.k8s_problems({"x.yaml": f"kind: ConfigMap\napiVersion: v1\ndata: {{{hc.CANARY}_key: 1}}\n"})
    assert hc.k8s_problems({"x.yaml": "kind: ConfigMap\napiVersion: v1\nspec: {command: [sh, -c, 'true; "
                                      f"{hc.CANARY}']}}\n"})
    capsys.readouterr()


@pytest.mark.parametrize("case", SUBSET, ids=lambda c: c.name[:60])
def test_no_hostile_config_is_a_traceback_or_renders_an_injection(tmp_path, capsys, case):
    cfg = case.write(tmp_path / "config.yaml")
    results, problems, rendered = [], [], False
    for argv, plat in ((["validate"], None), (["render", "-p", "slurm"], "slurm"), (["render", "-p", "k8s"], "k8s")):
        out = tmp_path / (plat or "v")
        try:
            rc = main([*argv, "--config", str(cfg), *(["--out", str(out)] if plat else [])])
        except Exception as exc:   # noqa: BLE001 - out of main, a user would read it as a traceback
            rc, err = 99, f"Traceback: {type(exc).__name__}: {exc}"
        else:
            err = capsys.readouterr().err
        results.append((rc, err))
        if plat and rc == 0:
            rendered = True
            files = {p.name: p.read_text(errors="replace") for p in out.iterdir()}
            problems += (hc.sbatch_problems(files["job.sbatch"]) if plat == "slurm" else hc.k8s_problems(files))
    assert hc.verdict(results, problems, rendered) in ("refused", "rendered safely"), (results, problems)
