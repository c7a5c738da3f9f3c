"""`poc report` and `poc rederive`: they read stored results only, so they take no config."""
from __future__ import annotations

from ..errors import StoreError
from .output import Out, asked_table, columns, data_format, emit


def cmd_report(args) -> int:
    from ..report.document import build

    out = Out(args.quiet, bool(data_format(args)))
    paths = build(args.results_dir, args.out)
    files = {k: str(v) for k, v in paths.items()}
    if not emit(args, files, asked_table(args, lambda: columns([[k, v] for k, v in files.items()], ["FILE", "PATH"]))):
        for k in ("report.md", "report.html", "summary.csv"):
            out.info(f"wrote {paths[k]}")
        charts = [k for k in paths if k.startswith("charts/")]
        out.info(f"wrote {len(charts)} charts in {paths['report.md'].parent / 'charts'}")
    return 0


def cmd_rederive(args) -> int:
    from .. import rederive

    checks = rederive.check(args.results_dir, args.campaign)
    emit(args, rederive.to_json(checks), table=lambda: rederive.table(checks))
    t = rederive.totals(checks)
    if t["runs_checked"] == 0:
        raise StoreError(f"no run recorded ok under {args.results_dir}: nothing to re-derive",
                         tip="re-derivation checks finished runs; run the campaign (or --resume it) first")
    if not rederive.passed(checks):
        raise StoreError(f"re-derivation failed: {rederive.summary(checks)}",
                         tip="the table lists each finding; a run stored before raw evidence was kept "
                             "(raw.json.gz) cannot be checked")
    return 0
