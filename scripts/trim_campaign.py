"""Copy a campaign directory into results/ small enough to commit, or clean a committed one in place.

    python scripts/trim_campaign.py SRC_CAMPAIGN_DIR DST_DIR
    python scripts/trim_campaign.py --in-place DIR [--root PATH=NAME ...] [--host NAME ...]
    python scripts/trim_campaign.py --scan DIR [--host NAME ...]     # machine paths and host names left, per kind

The copy keeps runs.jsonl, campaign.json and design.json (a sequential design's), the rendered jobs as
text, the raw evidence, and gzips the workload events and the logs, each log cut to its last 400 lines.
`poc report` reads the result like the original (events.jsonl.gz is read transparently). Never copied: the
campaign's owner key (.owner-key), its lock and its in-flight journal; --in-place deletes them where a copy
made by hand brought them along.

Every file passes through harness/redact.py as the Store writes it: secrets out, this machine's paths and host
name as placeholders ($STATE_DIR, $CACHE_DIR, $HARNESS, $CHECKOUT, $HOME, $HOST: harness/redact_machine.py),
the raw evidence (raw.json.gz) included. A campaign written by a harness that already does this is copied
unchanged; an older one is cleaned. `--root PATH=NAME` and `--host NAME` add the paths and host names of the
machine that made a campaign when it was not this one (another checkout: --root /work/main=$CHECKOUT).

The audit answer to "what was submitted" on Kubernetes is the sha256 of the JobSet's request body as stored
(harness/audit/k8s.py), and `poc rederive` computes it again from raw.json.gz. A body that held this machine's
paths has another digest once they are placeholders, so the answers whose digest is all that differs are
derived again from the cleaned body, with the same code rederive runs (every other difference is left and
listed: nothing else may change). Regenerate the report after.
"""
from __future__ import annotations

import argparse
import gzip
import json
import re
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# the script runs from a checkout, not an install
from harness import audit, redact, redact_machine
from harness.store import RAW_FILE, RunRecord, load_raw, raw_bytes

LOG_LINES = 400
INLINED = re.compile(r"data:[\w/+.-]+;base64,[A-Za-z0-9+/=]+")
RAW = RAW_FILE
NEVER = (".owner-key", ".lock", "inflight")   # the campaign's secret key, its lock, its journal: never committed
_DIGEST = re.compile(r"sha256 [0-9a-f]{16}")


def machine(roots: list[tuple[str, str]] = (), hosts: list[str] = ()) -> redact_machine.Machine:
    """This machine, plus the paths and host names of the one that made the campaign."""
    here = redact_machine.here()
    return redact_machine.Machine((*here.roots, *roots), (*here.hosts, *hosts))


def unmachine(text: str, m: redact_machine.Machine | None = None) -> str:
    """text with the machine's paths and host name as placeholders (no secret rule)."""
    return (m or machine()).neutral(text)


# -- one file, cleaned as the Store writes it ------------------------------------------------------------------------

def _json_format(text: str, obj: object):
    """The json.dumps that wrote text (so a cleaned file is written as it was), or None."""
    for dump in (lambda o: json.dumps(o, indent=2) + "\n", lambda o: json.dumps(o, indent=2),
                 lambda o: json.dumps(o, indent=1, sort_keys=True, default=str),
                 lambda o: json.dumps(o, separators=(",", ":"))):
        if dump(obj) == text:
            return dump
    return None


def _record_line(line: str, m: redact_machine.Machine) -> str:
    if not line.strip():
        return line
    data = json.loads(line)
    cleaned = redact.scrub(data, m).data
    if "raw_evidence" in data:   # the harness's own counts by rule, as Store.append keeps them
        cleaned["raw_evidence"] = data["raw_evidence"]
    return RunRecord.from_json(cleaned).to_line().decode()


def cleaned_text(name: str, text: str, m: redact_machine.Machine) -> str:
    """A file's text as the Store would write it: a JSON document as a structure (written back in its own
    format), runs.jsonl line by line as records, anything else (logs, rendered files, events.jsonl) by
    redact.scrub_text. (raw.json.gz is bytes: clean_file and trim write it with store.raw_bytes.)"""
    if name == "runs.jsonl":
        return "".join(_record_line(line, m) for line in text.splitlines(keepends=True))
    if name.endswith(".json"):
        obj = json.loads(text)
        dump = _json_format(text, obj)
        if dump is not None:
            return dump(redact.scrub(obj, m).data)
    return redact.scrub_text(text, m).data


def clean_file(path: Path, m: redact_machine.Machine) -> bool:
    """Rewrite one file cleaned (gzipped files stay gzipped, deterministic); whether it changed."""
    data = path.read_bytes()
    gz = path.suffix == ".gz"
    if path.name == RAW:
        new = raw_bytes(redact.scrub(json.loads(gzip.decompress(data)), m).data)
        if gzip.decompress(new) == gzip.decompress(data):
            return False
        path.write_bytes(new)
        return True
    text = (gzip.decompress(data) if gz else data).decode("utf-8", errors="surrogateescape")
    new_text = cleaned_text(path.name[:-3] if gz else path.name, text, m)
    if new_text == text:
        return False
    raw = new_text.encode("utf-8", errors="surrogateescape")
    path.write_bytes(gzip.compress(raw, mtime=0) if gz else raw)
    return True


# -- the audit digests, derived again from the cleaned bodies --------------------------------------------------------

def rederive_digests(cdir: Path) -> tuple[int, list[str]]:
    """Each run's (last record's) audit answer to "what" whose request-body digest changed with the cleaning,
    derived again from raw.json.gz by harness/audit. Returns (answers updated, differences left alone)."""
    path = cdir / "runs.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    last = {}
    for i, line in enumerate(lines):
        if line.strip():
            last[json.loads(line)["run_id"]] = i
    updated, left = 0, []
    for run_id, i in last.items():
        rec = json.loads(lines[i])
        stored = (rec.get("audit") or {}).get("answers", {}).get("what")
        if stored is None or rec.get("platform") not in audit.PLATFORMS:
            continue
        again = audit.answers(rec["platform"], load_raw(cdir / "runs" / run_id))["answers"]["what"]
        if again == stored:
            continue
        if _DIGEST.sub("sha256 *", json.dumps(again)) != _DIGEST.sub("sha256 *", json.dumps(stored)):
            left.append(f"{run_id}: {stored.get('value')!r} -> {again.get('value')!r}")
            continue
        rec["audit"]["answers"]["what"] = again
        lines[i] = RunRecord.from_json(rec).to_line().decode()
        updated += 1
    if updated:
        path.write_text("".join(lines))
    return updated, left


def campaign_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.rglob("runs.jsonl"))


def clean_in_place(root: Path, m: redact_machine.Machine) -> dict:
    """Every file under root (reports aside: regenerate them), then the audit digests of each campaign."""
    dropped = []
    for p in sorted(root.rglob("*"), reverse=True):
        if p.name in NEVER and p.exists():
            shutil.rmtree(p) if p.is_dir() else p.unlink()
            dropped.append(str(p))
    changed = [str(f) for f in sorted(p for p in root.rglob("*") if p.is_file())
               if f.suffix != ".png" and "report" not in f.relative_to(root).parts and clean_file(f, m)]
    digests = {str(c): rederive_digests(c) for c in campaign_dirs(root)}
    return {"dropped": dropped, "changed": changed, "digests": digests}


# -- a campaign copied for committing ---------------------------------------------------------------------------------

def trim(src: Path, dst: Path, m: redact_machine.Machine | None = None) -> None:
    m = m or machine()
    if not (src / "runs.jsonl").is_file():
        sys.exit(f"ERROR {src} has no runs.jsonl\nTIP pass a campaign directory: RESULTS_DIR/<campaign>")
    dst.mkdir(parents=True, exist_ok=True)
    for name in ("runs.jsonl", "campaign.json", "design.json"):   # design.json: a sequential design's stages
        if (src / name).is_file():
            (dst / name).write_text(cleaned_text(name, (src / name).read_text(), m))
    for f in sorted((src / "runs").rglob("*")):
        rel = f.relative_to(src)
        if not f.is_file() or any(part in NEVER for part in rel.parts):
            continue
        out = dst / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        if f.name == RAW:
            out.write_bytes(raw_bytes(redact.scrub(load_raw(f.parent), m).data))
            continue
        gz = f.suffix == ".gz"
        text = (gzip.decompress(f.read_bytes()) if gz else f.read_bytes()).decode("utf-8", errors="surrogateescape")
        name = f.name[:-3] if gz else f.name
        if rel.parts[2] == "logs":
            text = "\n".join(text.splitlines()[-LOG_LINES:]) + "\n"
        text = cleaned_text(name, text, m)
        if rel.parts[2] == "rendered" and not gz:
            out.write_text(text, errors="surrogateescape")
        else:
            out = out if gz else out.with_name(out.name + ".gz")
            out.write_bytes(gzip.compress(text.encode("utf-8", errors="surrogateescape"), mtime=0))
    _, left = rederive_digests(dst)
    for line in left:
        print(f"WARNING audit answer differs by more than its digest: {line}", file=sys.stderr)


# -- what is left of the machine ------------------------------------------------------------------------------------

# machines that made the committed results: their host name, and the checkout they ran from
MADE_ON_HOSTS = ("vm",)
MADE_FROM = ("/work/main",)


def marks(hosts: tuple[str, ...] = ()) -> dict[str, re.Pattern]:
    """What names a machine, matched more loosely than redact_machine replaces it (a scan that shared the
    replacer's rules could not find its mistakes): the home, state, cache and Docker directories and the
    checkout of this machine and of those that made the committed results (/root, /work), and host names:
    this machine's (when distinctive), the makers' and any given."""
    here = redact_machine.here()
    paths = {p for p, _ in here.roots} | {"/root", "/work", redact_machine.DOCKER_ROOT, *MADE_FROM}
    names = {h for h in (*here.hosts, *MADE_ON_HOSTS, *hosts) if redact_machine.distinctive_host(h)}
    alt = "|".join(re.escape(p) for p in sorted(paths, key=len, reverse=True))
    out = {"path": re.compile(r"(?<![\w])(?:" + alt + r")(?![\w.-])")}
    if names:
        alt = "|".join(map(re.escape, sorted(names)))
        out["host"] = re.compile(r"(?<![A-Za-z0-9.$])(?:" + alt + r")(?![A-Za-z0-9-])")
    return out


def _kind(rel: Path) -> str:
    name = rel.name[:-3] if rel.name.endswith(".gz") else rel.name
    if name == "raw.json":
        return RAW
    for sub in ("logs", "rendered", "report"):
        if sub in rel.parts[:-1]:
            return f"runs/<id>/{sub}/" if sub != "report" else "report/"
    return f"runs/<id>/{name}" if "runs" in rel.parts[:-2] else name


def scan(root: Path, hosts: tuple[str, ...] = ()) -> dict[tuple[str, str], int]:
    """(file kind, "path" or "host") -> how many marks of a machine every file under root holds, decompressed
    (pictures aside); only what was found."""
    pats = marks(hosts)
    found: dict[tuple[str, str], int] = {}
    for f in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix != ".png"):
        data = f.read_bytes()
        text = (gzip.decompress(data) if f.suffix == ".gz" else data).decode("utf-8", errors="replace")
        text = INLINED.sub("data:", text)   # report.html's inlined charts are pictures too (base64 spells "vm")
        for what, pat in pats.items():
            n = len(pat.findall(text))
            if n:
                key = (_kind(f.relative_to(root)), what)
                found[key] = found.get(key, 0) + n
    return found


def _root(text: str) -> tuple[str, str]:
    path, sep, name = text.partition("=")
    if not sep or not path.startswith("/") or not name.startswith("$"):
        raise argparse.ArgumentTypeError(f"{text!r}: give PATH=$NAME, such as /work/main=$CHECKOUT")
    return path, name


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src", help="a campaign directory (or, with --in-place, a committed results directory)")
    ap.add_argument("dst", nargs="?", help="where the trimmed copy goes")
    ap.add_argument("--in-place", "--paths-only", action="store_true", dest="in_place",
                    help="clean a committed results directory where it is")
    ap.add_argument("--scan", action="store_true", help="count the machine's paths and host names left under SRC")
    ap.add_argument("--root", action="append", type=_root, default=[], metavar="PATH=$NAME",
                    help="a path of the machine that made it, and its placeholder")
    ap.add_argument("--host", action="append", default=[], help="a host name of the machine that made it")
    args = ap.parse_args(argv)
    m = machine(args.root, args.host)
    if args.scan:
        found = scan(Path(args.src), tuple(args.host))
        for what in ("path", "host"):
            per = {k: n for (k, w), n in found.items() if w == what}
            print(f"{what}: {sum(per.values())}" + "".join(f"\n  {k}: {n}" for k, n in sorted(per.items())))
        return 0
    if args.in_place:
        done = clean_in_place(Path(args.src), m)
        print(f"{len(done['changed'])} file(s) changed, {len(done['dropped'])} dropped under {args.src}")
        for cdir, (updated, left) in done["digests"].items():
            if updated or left:
                print(f"{cdir}: {updated} audit digest(s) derived again from the cleaned request bodies")
            for line in left:
                print(f"WARNING {cdir}: audit answer differs by more than its digest: {line}")
        return 0
    if not args.dst:
        ap.error("give SRC_CAMPAIGN_DIR DST_DIR, or --in-place DIR")
    trim(Path(args.src), Path(args.dst), m)
    return 0


if __name__ == "__main__":
    sys.exit(main())
