"""The command line: every command, its options, a description and an example each."""
from __future__ import annotations

import argparse
import functools

from .. import __version__
from .campaign_cmds import cmd_cleanup, cmd_list, cmd_logs, cmd_status
from .check_cmd import cmd_check
from .cluster_cmds import cmd_cluster
from .common import DEFAULT_RESULTS
from .completion_cmd import INSTALL, SHELLS, cmd_completion
from .config_cmds import cmd_config_schema, cmd_config_show, cmd_render, cmd_validate
from .output import FORMATS
from .results_cmds import cmd_rederive, cmd_report
from .run import cmd_run, cmd_smoke
from .scale_cmds import add_parsers as add_scale_parsers

PLATFORM_METAVAR = "{local,slurm,k8s}"

EXIT_CODES = """\
exit codes:
  0    every run ok (or the command did what it was asked)
  1    a platform run failed, or another expected error (ERROR/TIP on stderr)
  2    bad input: an invalid config, option, --set or POC_* override
  3    a harness error: a run was recorded with status harness_error (a bug in this tool, not the platform)
  130  interrupted (Ctrl-C or SIGTERM); finished runs are kept, --resume continues

config overrides, applied before validation, later wins:
  the config file < POC_SECTION__KEY=value in the environment < --set section.key=value
  e.g. POC_WORKLOAD__STEPS=10 poc run --set repetitions=3 --set 'platforms=[slurm, k8s]'
"""


def _sub(sub, name: str, help: str, example: str, parents=(), description: str | None = None):
    return sub.add_parser(name, parents=list(parents), help=help,
                          description=description or help[:1].upper() + help[1:] + ".",
                          epilog=f"example:\n  {example}", formatter_class=argparse.RawDescriptionHelpFormatter)


def _platform(p, what: str) -> None:
    p.add_argument("--platform", "-p", action="append", metavar=PLATFORM_METAVAR,
                   help=f"one of local, slurm, k8s (kubernetes, kube: aliases of k8s); repeatable; {what}")


def _common_parents() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser, argparse.ArgumentParser]:
    out = argparse.ArgumentParser(add_help=False)
    out.add_argument("--quiet", "-q", action="store_true", help="print nothing but errors")
    out.add_argument("--output", "-o", choices=FORMATS, default=None,
                     help="data on stdout as json, yaml or a table (default: the human view)")
    out.add_argument("--json", action="store_const", dest="output", const="json", help="the same as -o json")
    out.add_argument("--verbose", "-v", action="count", default=0,
                     help="log what the harness does: -v info, -vv debug (on stderr, or --log-file)")
    out.add_argument("--log-file", metavar="PATH", help="write the log to PATH (at debug level unless -v says)")
    cfg = argparse.ArgumentParser(add_help=False)
    cfg.add_argument("--config", "-c", help="YAML config (default: the built-in local smoke config)")
    cfg.add_argument("--set", action="append", metavar="KEY.PATH=VALUE",
                     help="override a config value (YAML scalar or flow: 10, true, [a, b], {k: v}); repeatable; "
                          "wins over the file and POC_* variables")
    results = argparse.ArgumentParser(add_help=False)
    results.add_argument("--results", default=DEFAULT_RESULTS, help=f"results directory (default: ./{DEFAULT_RESULTS})")
    return out, cfg, results


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="poc",
                                description="Run the same PyTorch DDP job on Kubernetes and Slurm and compare them.",
                                epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    out, cfg, results = _common_parents()
    common = (cfg, out)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    resume = argparse.ArgumentParser(add_help=False)
    resume.add_argument("--resume", action="store_true",
                        help="continue an interrupted campaign: cancel what it left, skip runs already done")

    r = _sub(sub, "run", "run a campaign and store its results",
             "poc run --config my.yaml --platform slurm --platform k8s --results out --set repetitions=5",
             (*common, results, resume))
    _platform(r, "default: the config's platforms")
    r.add_argument("--campaign", help="campaign name (default: the config's)")
    r.add_argument("--repetitions", type=int, help="clean runs per platform (overrides the config)")
    r.add_argument("--drill", action="append", choices=["restart", "upgrade"],
                   help="an upgrade drill on each scheduler platform (repeatable; overrides drills.kinds)")
    r.add_argument("--serve", action="store_true",
                   help="add the serving scenario on each scheduler platform (overrides serve.enabled)")
    r.add_argument("--strict-design", action="store_true",
                   help="refuse a plan that cannot decide a primary question (too few rounds for the exact test to "
                        "pass Holm's threshold), instead of warning")
    r.add_argument("--design", choices=["fixed", "sequential"], default="fixed",
                   help="sequential: after the config's plan, add rounds of Kubernetes and Slurm for the questions "
                        "still open, decided by anytime-valid e-values, within --budget (docs/method.md)")
    r.add_argument("--budget", metavar="DURATION",
                   help="the sequential design's time for the whole campaign (default 45m; implies --design "
                        "sequential)")
    r.add_argument("--confirm-cluster", metavar="NAME",
                   help="the cluster's name (Slurm ClusterName, the kubeconfig context's cluster): your word that "
                        "it is yours to restart; the local clusters need none")
    r.set_defaults(func=cmd_run)

    st = _sub(sub, "status", "a campaign's planned runs: how many are done, failed, in flight, still to run",
              "poc status --results out --campaign smoke    # works while `poc run` runs in another terminal",
              (*common, results))
    st.add_argument("--campaign", help="campaign name (default: the only campaign under --results, else the config's)")
    _platform(st, "default: the campaign's")
    st.set_defaults(func=cmd_status)

    ls = _sub(sub, "list", "the campaigns under a results directory, with their run counts",
              "poc list --results out", (out, results))
    ls.set_defaults(func=cmd_list)

    lg = _sub(sub, "logs", "a run's job output: as the store kept it, or so far where the job runs",
              "poc logs slurm-clean-01 --results out", (out, results),
              description="Print a run's job output as the store kept it (runs/RUN_ID/logs, decompressed). "
                          "A run in flight: its output so far, read where the job writes it (Slurm's output "
                          "file on the login node, the JobSet's pods' logs, the local agents' log files or "
                          "containers' logs).")
    lg.add_argument("run_id", metavar="RUN_ID", help="a run id, as `poc status` lists them")
    lg.add_argument("--campaign", help="the campaign (default: the one campaign under --results that has RUN_ID)")
    lg.set_defaults(func=cmd_logs)

    for name, what, example in (
            ("cleanup", "undo what an interrupted campaign left (jobs, lost nodes) without resuming it",
             "poc cleanup --results out --campaign smoke"),
            ("cancel", "stop a running campaign (SIGTERM to its process: it cancels its jobs), then clean up "
                       "what it left, as `cleanup` does", "poc cancel --results out --campaign smoke")):
        cu = _sub(sub, name, what, example, (*common, results))
        cu.add_argument("--campaign", help="campaign name (default: the config's)")
        if name == "cancel":
            cu.add_argument("--wait", type=float, default=120.0, metavar="SECONDS",
                            help="how long the running process may take to cancel its jobs (default: 120)")
        cu.set_defaults(func=cmd_cleanup)

    sm = _sub(sub, "smoke", "local clusters up, the default campaign on every platform, the report",
              "poc smoke --platform local --repetitions 2", (*common, results, resume))
    _platform(sm, "default: local, slurm, k8s")
    sm.add_argument("--campaign", help="campaign name (default: smoke-poc)")
    sm.add_argument("--repetitions", type=int,
                    help="clean runs per platform (default: 6, 5 with --design sequential; a within-round verdict "
                         "needs more under Holm's correction: `poc smoke` says how many before it runs)")
    sm.add_argument("--no-clusters", action="store_true",
                    help="do not start the local clusters (use what the config points at)")
    sm.add_argument("--design", choices=["fixed", "sequential"], default="fixed",
                    help="fixed: the plan as it is (warned about where it cannot decide a primary question); "
                         "sequential: after it, add rounds for the questions still open, decided by anytime-valid "
                         "e-values, within --budget (docs/method.md)")
    sm.add_argument("--budget", metavar="DURATION",
                    help="the sequential design's time for the whole smoke, first stage included (default 45m; "
                         "implies --design sequential)")
    sm.add_argument("--strict-design", action="store_true",
                    help="refuse a fixed plan that cannot decide a primary question, instead of warning")
    sm.set_defaults(func=cmd_smoke)

    rd = _sub(sub, "render", "print or write the job as each platform would receive it",
              "poc render --platform slurm --run-id slurm-kill-rank-01 --out rendered/", common)
    _platform(rd, "default: the config's platforms")
    rd.add_argument("--out", help="write files into this directory instead of printing")
    rd.add_argument("--run-id", help="run id to render (default: the first planned run; "
                                     "<contention run id>-blocker renders its blocking job)")
    rd.set_defaults(func=cmd_render)

    rp = _sub(sub, "report", "write report.md/.html, charts and summary.csv from results",
              "poc report results/smoke-2026-12-03", (out,),
              description="Write report.md, report.html, charts and summary.csv from stored results. It reads "
                          "the config each campaign stored, so it takes no --config.")
    rp.add_argument("results_dir", help="a results directory or one campaign inside it")
    rp.add_argument("--out", help="output directory (default: RESULTS_DIR/report)")
    rp.set_defaults(func=cmd_report)

    rv = _sub(sub, "rederive", "re-derive every stored metric from the stored raw evidence and list each mismatch",
              "poc rederive results/smoke-2026-12-03 -o json", (out,),
              description="Re-derive every stored metric from the stored raw evidence and list each mismatch. "
                          "It reads only what the store holds, so it takes no --config.")
    rv.add_argument("results_dir", help="a results directory or one campaign inside it")
    rv.add_argument("--campaign", help="only this campaign of the results directory")
    rv.set_defaults(func=cmd_rederive)

    v = _sub(sub, "validate", "check a config (with its overrides)", "poc validate --config my.yaml --server-dry-run",
             common)
    v.add_argument("--server-dry-run", action="store_true",
                   help="also send the rendered Kubernetes objects to the API server with dryRun=All "
                        "(schema, RBAC and webhooks check them; nothing is created)")
    v.set_defaults(func=cmd_validate)

    ck = _sub(sub, "check", "can this user reach the config's clusters and do what a campaign does there",
              "poc check --config my.yaml --platform slurm -o json", common,
              description="Check, with the user's own rights and in seconds, what a campaign needs: Slurm's login "
                          "node (reachable, host key known), sinfo, the partition, sbatch --test-only of the job, "
                          "sacct; Kubernetes' API server, the APIs the renderer writes, every RBAC verb the harness "
                          "uses, the LocalQueue and the quota behind it. Nothing is submitted. Exit code 1 when a "
                          "check failed.")
    _platform(ck, "slurm or k8s; default: the config's slurm and k8s platforms")
    ck.add_argument("--require-api", action="append", metavar="GROUP/VERSION[/PLURAL]",
                    help="also require that the API server serves this API (repeatable), e.g. a version a newer "
                         "harness will render: kueue.x-k8s.io/v1beta2/workloads")
    ck.set_defaults(func=cmd_check)

    c = _sub(sub, "config", "configuration helpers", "poc config show > poc.yaml")
    csub = c.add_subparsers(dest="config_command", required=True, metavar="SUBCOMMAND")
    cs = _sub(csub, "show", "print the default config (or --config's, resolved, with overrides) as YAML",
              "poc config show --config my.yaml --set workload.steps=10 -o json", common)
    cs.set_defaults(func=cmd_config_show)
    sc = _sub(csub, "schema", "print the JSON Schema of the config, for editors and linters",
              "poc config schema > poc.schema.json", (out,))
    sc.set_defaults(func=cmd_config_schema)

    _cluster_parsers(sub, common)
    add_scale_parsers(sub, _sub, common, out, results)

    co = _sub(sub, "completion", "print a shell completion script for poc's commands and options",
              "poc completion bash > ~/.local/share/bash-completion/completions/poc", description=INSTALL)
    co.add_argument("shell", choices=SHELLS, metavar="SHELL", help="one of " + ", ".join(SHELLS))
    co.set_defaults(func=functools.partial(cmd_completion, build_parser=build_parser))
    return p


def _emulated_args(a, action: str) -> None:
    """Emulated GPU nodes for scale replays: KWOK nodes on the native Kubernetes cluster (--k8s), an emulated
    Slurm cluster in one container (--slurm); sized by `up`, removed alone by `down`."""
    if action == "up":
        a.add_argument("--emulated", type=int, default=None, metavar="N",
                       help="N emulated GPU nodes: KWOK nodes added to the native Kubernetes cluster (--k8s) "
                            "and/or an emulated Slurm cluster of its own, slurmctld and N slurmd in one "
                            "container (--slurm)")
        a.add_argument("--gpus-per-node", type=int, default=8, metavar="G", help="GPUs per emulated node (default 8)")
        a.add_argument("--rack-size", type=int, default=8, metavar="R", help="emulated nodes per rack (default 8)")
        a.add_argument("--racks-per-block", type=int, default=4, metavar="B",
                       help="racks per topology block (default 4)")
        a.add_argument("--client-qps", metavar="COMPONENT=QPS[/BURST],...",
                       help="native Kubernetes (--k8s): the controllers' client rate limits, e.g. "
                            "kueue=200/300,kube-controller-manager=200/300, or `default`; restarts the ones that "
                            "change; replays record them (default: each controller's own, Kueue 20/30)")
        a.add_argument("--kueue-fair-sharing", choices=["on", "off"], default=None,
                       help="native Kubernetes (--k8s): Kueue's fairSharing.enable (ClusterQueues of a cohort "
                            "admitted by their dominant share); restarts Kueue when it changes; replays record it "
                            "(default: as set, off on a new cluster)")
        a.add_argument("--queue-policy", default=None, metavar="PAIR",
                       help="emulated Slurm (--slurm): the Slurm side of a queue policy pair, site (default), "
                            "defaults, strict-fifo or no-size (SchedulerType and PriorityWeight*; "
                            "docs/scale-traces.md); `poc scale replay --queue-policy` gives Kueue its side")
        a.add_argument("--fairshare-half-life", type=int, default=7 * 24 * 60, metavar="MIN",
                       help="emulated Slurm (--slurm): PriorityDecayHalfLife of past usage in fair share, in "
                            "minutes (default 10080, Slurm's 7 days); divide it by a replay's --compress to keep "
                            "the history's decay; PriorityMaxAge follows it")
    elif action == "down":
        a.add_argument("--emulated", action="store_true",
                       help="remove only the emulated nodes (KWOK's, and the emulated Slurm container); "
                            "the clusters stay up")


def _cluster_parsers(sub, common) -> None:
    cl = _sub(sub, "cluster", "local clusters: Slurm in Docker, native Kubernetes, kind",
              "poc cluster up --slurm --k8s")
    clsub = cl.add_subparsers(dest="cluster_command", required=True, metavar="ACTION")
    release_help = "Debian release of the images (trixie: Slurm 24.11, bookworm: 22.05)"
    for action, what, example in (
            ("up", "start the local cluster(s), building what is missing; cheap when running",
             "poc cluster up --slurm --k8s --provider native"),
            ("down", "stop and remove the local cluster(s)", "poc cluster down --k8s"),
            ("status", "the components of the local cluster(s); never builds or pulls",
             "poc cluster status --slurm -o json")):
        a = _sub(clsub, action, what, example, common)
        a.add_argument("--slurm", action="store_true", help="the Slurm-in-Docker cluster")
        a.add_argument("--k8s", action="store_true", help="the local Kubernetes cluster")
        a.add_argument("--provider", choices=["auto", "native", "kind"], default="auto",
                       help="Kubernetes provider (auto: for up, kind when its node image can be had, else native)")
        a.add_argument("--nodes", type=int, default=3, help="Kubernetes nodes (two for the job, one spare)")
        a.add_argument("--release", default=None, help=release_help)
        _emulated_args(a, action)
        a.set_defaults(func=cmd_cluster)
    im = _sub(clsub, "images", "build the project's container images that are missing", "poc cluster images worker",
              common)
    im.add_argument("what", nargs="?", default="all", choices=["base", "worker", "slurm", "mariadb", "all", "prune"],
                    help="which image (default: all); prune removes tags whose build inputs changed")
    im.add_argument("--release", default=None, help=release_help)
    im.set_defaults(func=cmd_cluster)
