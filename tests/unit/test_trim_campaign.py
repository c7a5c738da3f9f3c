"""scripts/trim_campaign.py: what is committed under results/ names no directory of the machine that
made it (the raw scheduler evidence aside, whose request-body hashes `poc rederive` checks)."""
from __future__ import annotations

import gzip
import importlib.util
import re

from support.paths import ROOT

spec = importlib.util.spec_from_file_location("trim_campaign", ROOT / "scripts" / "trim_campaign.py")
trim = importlib.util.module_from_spec(spec)
spec.loader.exec_module(trim)

MACHINE_PATH = re.compile(r"(?<![\w$])/(root|home/[^/\s\"']+)/")


def test_paths_become_named_placeholders_longest_first(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", "/home/alice")
    monkeypatch.setenv("POC_STATE_DIR", "/home/alice/.local/state/k8s-slurm-poc")
    monkeypatch.setenv("POC_CACHE_DIR", "/scratch/alice/poc-cache")
    text = ('known_hosts: /home/alice/.local/state/k8s-slurm-poc/slurm/known_hosts\n'
            '{"venv": "/scratch/alice/poc-cache/venv-1", "key": "/home/alice/.ssh/id_ed25519", '
            '"home": "/home/alice", "other": "/home/alicex/file"}')
    assert trim.unmachine(text) == ('known_hosts: $STATE_DIR/slurm/known_hosts\n'
                                    '{"venv": "$CACHE_DIR/venv-1", "key": "$HOME/.ssh/id_ed25519", '
                                    '"home": "$HOME", "other": "/home/alicex/file"}')


def test_trim_names_no_machine_path_and_keeps_the_raw_evidence_as_it_is(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", "/home/alice")
    src = tmp_path / "src"
    (src / "runs" / "r1" / "rendered").mkdir(parents=True)
    (src / "runs.jsonl").write_text('{"run_id": "r1", "dir": "/home/alice/poc"}\n')
    (src / "runs" / "r1" / "rendered" / "job.sbatch").write_text("#SBATCH --chdir=/home/alice/poc/r1\n")
    raw = gzip.compress(b'{"body": "/home/alice/poc"}')
    (src / "runs" / "r1" / "raw.json.gz").write_bytes(raw)
    with gzip.open(src / "runs" / "r1" / "events.jsonl.gz", "wt") as fh:
        fh.write('{"cwd": "/home/alice/poc"}\n')
    trim.trim(src, tmp_path / "dst")
    dst = tmp_path / "dst"
    assert (dst / "runs.jsonl").read_text() == '{"run_id": "r1", "dir": "$HOME/poc"}\n'
    assert (dst / "runs" / "r1" / "rendered" / "job.sbatch").read_text() == "#SBATCH --chdir=$HOME/poc/r1\n"
    assert gzip.decompress((dst / "runs" / "r1" / "events.jsonl.gz").read_bytes()) == b'{"cwd": "$HOME/poc"}\n'
    assert (dst / "runs" / "r1" / "raw.json.gz").read_bytes() == raw


def test_the_committed_results_name_no_machine_path():
    found = []
    for f in sorted((ROOT / "results").rglob("*")):
        if not f.is_file() or f.suffix == ".png" or f.name == trim.RAW:
            continue
        data = gzip.decompress(f.read_bytes()) if f.suffix == ".gz" else f.read_bytes()
        text = data.decode(errors="replace")
        found += [f"{f.relative_to(ROOT)}: {m.group(0)}" for m in MACHINE_PATH.finditer(text)][:1]
    assert found == [], found[:20]
