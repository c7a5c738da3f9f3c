"""Hand-made load results as harness/serve/load.py's summarise writes them, for the serving figures' tests."""
from __future__ import annotations

from hdrh.histogram import HdrHistogram

from harness.serve import load

T0 = 1_700_000_000.0


def result(rows, elapsed_s=10.0, clients=4):
    """A load result from (start offset, latency, error) rows."""
    h = HdrHistogram(load.HIST_LOWEST_US, load.HIST_HIGHEST_US, load.HIST_DIGITS)
    for _, lat, err in rows:
        if err is None:
            h.record_value(round(lat * 1e6))
    ok = sum(err is None for *_, err in rows)
    return {"started": T0, "elapsed_s": elapsed_s, "stopped_by": "count", "plan": {"clients": clients, "timeout_s": 5},
            "ok": ok, "failed": len(rows) - ok, "latency_s": {"p50": None},
            "histogram": {"data": h.encode().decode()},
            "log": {"start": [s for s, *_ in rows], "latency_s": [lat for _, lat, _ in rows],
                    "status": [200 if e is None else None for *_, e in rows], "error": [e for *_, e in rows]}}


# one request every 0.1 s taking 0.02 s; the server dies for the requests started in [2.0, 3.0)
FAULT = [(i / 10, 0.02, "connect" if 20 <= i < 25 else "http_503" if 25 <= i < 30 else None) for i in range(50)]
