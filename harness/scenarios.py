"""The scenarios by kind: what a planned run's scenario string ("clean", a fault kind, "contention",
"serve", "drill:<kind>", "mistake:<kind>") runs with. The pipeline and `poc rederive` ask here and
name no scenario; a new scenario is its class (context.Scenario's hooks) plus one line below.

``SCENARIOS``: kinds the pipeline executes as a training run with hooks. ``RUNNERS``: kinds that
make their own record instead (a user-experience probe submits a broken job and watches what the
user is told: it trains nothing).
"""
from __future__ import annotations

from collections.abc import Callable

from . import capabilities as cap
from .contention import ContentionScenario
from .context import Scenario
from .drills.scenario import DrillScenario
from .injection import FaultScenario
from .serve.scenario import ServeScenario

SCENARIOS: dict[str, type[Scenario]] = {
    "clean": Scenario,
    **{kind: FaultScenario for kind in sorted(set().union(*cap.FAULTS.values()))},
    "contention": ContentionScenario,
    "serve": ServeScenario,
    "drill": DrillScenario,
}


def _mistake(cfg, platform, run_id, kind, store, make_backend, **kw) -> dict:
    from .ux import probe
    return probe.run(cfg, platform, run_id, kind, store, make_backend, **kw)


# kind -> run(cfg, platform, run_id, argument after "kind:", store, make_backend, clock=, sleep=, progress=)
RUNNERS: dict[str, Callable[..., dict]] = {"mistake": _mistake}


def kind_of(scenario: str) -> tuple[str, str]:
    """("drill", "restart") for "drill:restart"; ("clean", "") for "clean"."""
    kind, _, arg = scenario.partition(":")
    return kind, arg


def scenario_class(scenario: str) -> type[Scenario]:
    """The class a planned or stored run's scenario runs with; a kind with no hooks (a blocker's or a
    queued job's record) is a plain training run."""
    return SCENARIOS.get(kind_of(scenario)[0], Scenario)


def runner(scenario: str) -> Callable[..., dict] | None:
    return RUNNERS.get(kind_of(scenario)[0])
