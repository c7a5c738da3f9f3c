"""Commands that read a config and touch no results: `render`, `validate`, `config show|schema`."""
from __future__ import annotations

from pathlib import Path

from .. import config as cfgmod
from ..config import review
from . import common
from .output import data_format, emit, warn


def cmd_render(args) -> int:
    from ..backends.factory import make_backend
    from ..scenarios import job_spec, plan, scenario_class
    from ..spec import Planned

    cfg = common.load(args)
    plats = common.platforms(args, cfg)
    fmt = data_format(args)
    rendered_all: dict[str, dict[str, str]] = {}
    written: list[str] = []
    for plat in plats:
        runs = plan(cfg, plat) or [Planned(f"{plat}-clean-01")]
        want = args.run_id or runs[0].run_id
        # a planned run renders as planned (its fault, its scenario); "<contention run>-blocker" is
        # that run's blocking job; any other id renders the first planned run under that name
        planned = {p.run_id: p for p in runs}
        blocker = want.endswith("-blocker") and want.removesuffix("-blocker") in planned
        p = planned.get(want.removesuffix("-blocker") if blocker else want) or runs[0]._replace(run_id=want)
        run_cfg = cfg
        if p.scenario.startswith("mistake:"):   # a probe renders with its mistake in it, as it is submitted
            from ..ux import mistakes, probe
            m = mistakes.make(cfg, plat, p.scenario.split(":", 1)[1])
            run_cfg, spec = m.cfg, probe.probe_spec(m, p.run_id)
        else:
            spec = job_spec(cfg, plat, p)
        if blocker:
            spec = next(iter(scenario_class(p.scenario).also_submits(cfg, spec)), spec)
        backend = make_backend(plat, run_cfg)
        rendered = backend.render(spec)
        rendered_all[plat] = dict(rendered.files)
        if args.out:
            d = Path(args.out) / plat if len(plats) > 1 else Path(args.out)
            d.mkdir(parents=True, exist_ok=True)
            for name, text in rendered.files.items():
                (d / name).write_text(text)
                written.append(str(d / name))
                if not fmt:
                    print(str(d / name))
        elif not fmt:
            for name, text in rendered.files.items():
                if len(rendered.files) > 1 or len(plats) > 1:
                    print(f"# ---- {plat}: {name} ----")
                print(text, end="" if text.endswith("\n") else "\n")
    if fmt:
        emit(args, {"written": written} if args.out else {"platforms": rendered_all})
    return 0


def cmd_validate(args) -> int:
    from ..render.validate import check_config
    from ..scenarios import submitted_specs

    cfg = common.load(args)
    check_config(cfg, submitted_specs)  # what `poc render` and a run would refuse is refused here too
    said = review.warnings(cfg)   # what a reviewer of a shared config must see, whatever --quiet says
    warn(list(said))
    dry = None
    fmt = data_format(args)
    if args.server_dry_run:   # the Kubernetes API server's own verdict on the rendered objects
        from ..backends.k8s import dryrun
        dry = dryrun.validate_config(cfg, submitted_specs(cfg, "k8s"))
        if (err := dryrun.failure(dry)) is not None:
            raise err
        if not fmt and not args.quiet:
            print(f"OK server dry-run at {dry['api_server']}: {len(dry['objects'])} objects accepted")
    applied = args.overrides_applied

    def human() -> str:
        return (f"OK {args.config or '<built-in default>'}"
                f"{' with ' + str(len(applied)) + ' override(s)' if applied else ''}: campaign {cfg.campaign}, "
                f"platforms {', '.join(cfg.platforms)}, "
                f"{cfg.resources.nodes} nodes x {cfg.resources.procs_per_node} ranks, {cfg.workload.steps} steps, "
                f"{cfg.repetitions} clean run(s) + {len(cfg.faults)} fault(s) per platform"
                + (f" (the local baseline at most {cfg.local.rounds} of each)"
                   if cfg.local.rounds and "local" in cfg.platforms else "")
                + (f", {len(cfg.scale.nodes) * cfg.scale.repetitions} scale run(s) per scheduler "
                   f"(nodes {', '.join(map(str, cfg.scale.nodes))})" if cfg.scale.nodes else ""))
    if fmt == "json":   # one line, as it always was: scripts read it with a line reader
        import json
        print(json.dumps({"ok": True, "config_hash": cfg.config_hash(), "overrides": applied, "warnings": said,
                          **({"server_dry_run": dry} if dry else {})}))
    else:
        emit(args, {"ok": True, "config_hash": cfg.config_hash(), "overrides": applied, "warnings": said,
                    **({"server_dry_run": dry} if dry else {})}, table=human)
    return 0


def cmd_config_show(args) -> int:
    cfg = common.load(args)
    fmt = data_format(args)
    if args.config is None and not args.overrides_applied and not fmt:
        print(cfgmod.default_yaml(), end="")   # the commented file, to save and edit
        return 0
    data = cfg.model_dump(mode="json")
    if not emit(args, data):   # no -o, or -o table: YAML is this command's human view
        import yaml

        print(yaml.safe_dump(data, sort_keys=False), end="")
    return 0


def cmd_config_schema(args) -> int:
    schema = cfgmod.Config.model_json_schema()
    schema.setdefault("$schema", "https://json-schema.org/draft/2020-12/schema")
    schema.setdefault("title", "k8s-slurm-poc config")
    if data_format(args) == "yaml":
        emit(args, schema)
    else:   # an editor reads JSON; the table view of a schema would be the JSON anyway
        import json
        print(json.dumps(schema, indent=2))
    return 0
