"""The scenarios by kind: what a planned run's scenario string ("clean", a fault kind, "contention",
"scale:<nodes>", "serve", "drill:<kind>", "mistake:<kind>") runs with, and the plan they make together.
The pipeline, `poc rederive` and the commands that render or check a campaign ask here and name no
scenario; a new scenario is its class (context.Scenario's hooks) plus one line in ``REGISTRY``.

A kind's class is either a ``context.Scenario`` (the pipeline executes its run as a training run and
calls its hooks) or one that makes its own record with ``run`` instead (a user-experience probe
submits a broken job and watches what the user is told: it trains nothing). Both plan their runs.
"""
from __future__ import annotations

from collections.abc import Callable

from . import capabilities as cap
from .config import Config
from .contention import ContentionScenario
from .context import CleanRuns, Scenario
from .drills.scenario import DrillScenario
from .injection import FaultScenario
from .scale_curve import ScaleScenario
from .serve.scenario import ServeScenario
from .spec import JobSpec, Planned, build
from .ux.probe import MistakeProbe

# kind -> its class, in plan order: a platform's runs come in this order, each class's once
REGISTRY: dict[str, type] = {
    "clean": CleanRuns,
    **{kind: FaultScenario for kind in sorted(set().union(*cap.FAULTS.values()))},
    "contention": ContentionScenario,
    "scale": ScaleScenario,     # the config's job at each of scale.nodes' sizes
    "mistake": MistakeProbe,
    "serve": ServeScenario,
    "drill": DrillScenario,      # last: an upgrade drill leaves a new cluster behind it
}


def kind_of(scenario: str) -> tuple[str, str]:
    """("drill", "restart") for "drill:restart"; ("clean", "") for "clean"."""
    kind, _, arg = scenario.partition(":")
    return kind, arg


def _executed(cls) -> bool:
    return isinstance(cls, type) and issubclass(cls, Scenario)


def scenario_class(scenario: str) -> type[Scenario]:
    """The class a planned or stored run's scenario runs with; a kind with no hooks (a blocker's or a
    queued job's record) is a plain training run."""
    cls = REGISTRY.get(kind_of(scenario)[0])
    return cls if _executed(cls) else Scenario


def runner(scenario: str) -> Callable[..., dict] | None:
    """run(cfg, platform, run_id, argument after "kind:", store, make_backend, clock=, sleep=, progress=)
    of a kind that makes its own record; None for one the pipeline executes."""
    cls = REGISTRY.get(kind_of(scenario)[0])
    return None if cls is None or _executed(cls) else cls.run


def plan(cfg: Config, platform: str) -> list[Planned]:
    """The runs of one platform: each registered class's planned runs, in registry order."""
    out: list[Planned] = []
    for cls in dict.fromkeys(REGISTRY.values()):
        out += cls.planned(cfg, platform)
    return out


def job_spec(cfg: Config, platform: str, planned: Planned) -> JobSpec:
    """The job a planned run submits: the config's job as its scenario shapes it."""
    spec = build(cfg, platform, planned.run_id, planned.fault, planned.scenario)
    return scenario_class(planned.scenario).shaped(cfg, spec)


def submitted_specs(cfg: Config, platform: str) -> list[JobSpec]:
    """Every job a campaign on platform submits: each planned run's and the other jobs its scenario
    submits beside it (a contention run's blocker)."""
    out = []
    for p in plan(cfg, platform):
        spec = job_spec(cfg, platform, p)
        out += [spec, *scenario_class(p.scenario).also_submits(cfg, spec)]
    return out
