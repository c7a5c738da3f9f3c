"""`poc check`: can this user reach the clusters of the config and do there what a campaign will do?
Each check prints one line as it finishes (ok, note, skip; an ERROR with its TIP on stderr) with the
seconds it took; -o json|yaml|table prints them all as data. Exit code 0 when every check passed, 1
when one failed, 2 for bad input. The checks themselves are in harness/check/."""
from __future__ import annotations

import sys

from ..errors import ConfigError
from . import common
from .output import columns, data_format, emit

CHECKED = ("slurm", "k8s")


def _first_spec(cfg, plat: str):
    """The job the campaign would submit first, as `poc render` renders it (a user-experience probe,
    which is a mistake on purpose, gives way to a clean run)."""
    from ..scenarios import job_spec, plan, runner
    from ..spec import Planned

    runs = [p for p in plan(cfg, plat) if runner(p.scenario) is None]
    return job_spec(cfg, plat, runs[0] if runs else Planned(f"{plat}-clean-01"))


def _largest_spec(cfg, plat: str, first):
    """The job of the campaign that asks for the most nodes (a scale curve's largest size), where that is
    more than ``first`` asks for; else None."""
    from ..scenarios import submitted_specs

    big = max(submitted_specs(cfg, plat), key=lambda s: s.nodes, default=first)
    return big if big.nodes > first.nodes else None


def _what(spec) -> str:
    return f"the campaign's largest job ({spec.run_id}: {spec.nodes} nodes)"


def _slurm(cfg, backend_fn, runner) -> None:
    from ..check import slurm as chk

    if backend_fn is not None:
        backend = backend_fn("slurm", cfg)
    else:
        from ..backends.slurm import SlurmBackend
        backend = SlurmBackend.from_config(cfg)
        ssh = chk.ssh_of(backend.t)
        if ssh is not None:   # a check answers at once: the campaign's back-off is for a link that drops mid-run
            ssh.retries, ssh.connect_timeout = 0, chk.CONNECT_TIMEOUT_S
    try:
        shell = getattr(backend.sched, "shell", backend.t)   # slurmrestd: its ssh shell, None with a mount
        first = _first_spec(cfg, "slurm")
        big = _largest_spec(cfg, "slurm", first)
        target = chk.SlurmTarget(sched=backend.sched, shell=shell, ssh=chk.ssh_of(shell),
                                 script=backend.render(first).payload.script,
                                 partition=cfg.slurm.partition, accept_unknown_host=cfg.slurm.accept_unknown_host,
                                 largest=None if big is None else (_what(big), backend.render(big).payload.script))
        chk.run_all(target, runner)
    finally:
        backend.close()


def _required_apis(texts: list[str]) -> list:
    from ..check.k8s import RENDERED_APIS, parse_api

    try:
        return [*RENDERED_APIS, *(parse_api(a) for a in texts)]
    except ValueError as exc:
        raise ConfigError(f"--require-api {exc}", tip="e.g. --require-api kueue.x-k8s.io/v1beta2/workloads") from None


def _k8s(cfg, backend_fn, runner, apis) -> None:
    from ..check import k8s as chk
    from ..render import jobset as rj

    backend = backend_fn("k8s", cfg) if backend_fn is not None else _k8s_backend(cfg)
    try:
        k = cfg.kubernetes
        required, optional = chk.needed(k, node_faults=backend.node_faults, serving=backend.serving_rbac)
        spec = _first_spec(cfg, "k8s")
        big = _largest_spec(cfg, "k8s", spec)   # the quota must fit the largest job the campaign submits
        job = None if big is None else {
            "what": _what(big), "tip": f"lower scale.nodes' largest size ({big.nodes}) to what the quota fits, or "
                                       "ask the cluster admins for more quota in the ClusterQueue behind "
                                       "kubernetes.local_queue"}
        chk.run_all(chk.LiveCluster(backend.client), k, runner, apis=apis, required=required, optional=optional,
                    requests=rj.resources(spec, k.pod.extra_resources)["requests"], pods=(big or spec).nodes,
                    managed=backend.local, job=job)
    finally:
        backend.close()


def _k8s_backend(cfg):
    from ..backends.k8s import KubernetesBackend
    return KubernetesBackend.from_config(cfg)


def cmd_check(args) -> int:
    from ..check.report import Runner, as_data, exit_code, lines, summary

    cfg = common.load(args)
    plats = common.platforms(args, cfg)
    if args.platform:
        other = [p for p in plats if p not in CHECKED]
        if other:
            raise ConfigError(f"poc check checks slurm and k8s, not {', '.join(other)}",
                              tip="use --platform slurm or --platform k8s")
    plats = [p for p in plats if p in CHECKED]
    if not plats:
        raise ConfigError(f"the config's platforms ({', '.join(cfg.platforms)}) name no cluster to check",
                          tip="use --platform slurm and/or --platform k8s, or a config whose platforms list them")
    extra = _required_apis(args.require_api or []) if "k8s" in plats else []
    fmt = getattr(args, "output", None)
    human = fmt is None and not args.quiet

    def show(c) -> None:
        text, error = lines(c)
        if error or human:
            print("\n".join(text), file=sys.stderr if error else sys.stdout, flush=True)

    checks = []
    for plat in plats:
        runner = Runner(plat, on_check=show)
        if plat == "slurm":
            _slurm(cfg, args.backend_fn, runner)
        else:
            _k8s(cfg, args.backend_fn, runner, extra)
        checks += runner.checks
    if data_format(args) or fmt == "table":
        emit(args, as_data(checks), table=lambda: columns(
            [[c.platform, c.name, c.status, f"{c.seconds:.2f}", c.message[:100]] for c in checks],
            ["PLATFORM", "CHECK", "RESULT", "SECONDS", "MESSAGE"]))
    elif human:
        print(summary(checks))
    return exit_code(checks)
