"""Stored records -> one row per (run, metric key) of the successful runs, as the report groups them.

A test helper: the rows check that every stored metric reaches the report's groups under the right run,
scenario and unit. The report itself never needs this long form."""
from __future__ import annotations

from harness.report import stats
from harness.report.table import from_records

COLUMNS = ("run_id", "campaign", "platform", "scenario", "metric", "unit", "value")


def tidy(runs: list[dict]) -> list[dict]:
    """Rows in stored-record order (a run's metrics in report order)."""
    table = from_records(runs)
    rows = []
    for (platform, key), g in stats.groups(table).items():
        for i, value in zip(g.runs.tolist(), g.values.tolist(), strict=True):
            rows.append((i, {"run_id": table.run_id[i], "campaign": table.campaign[i], "platform": platform,
                             "scenario": table.scenario[i], "metric": key, "unit": g.unit, "value": value}))
    rows.sort(key=lambda r: r[0])   # stable: a run's rows keep the groups' order
    return [r for _, r in rows]
