"""The report's sections, in the order the report shows them.

Each says whether it applies from what the campaign holds (section.py); the document renders those that
do, in this order. A new scenario's section is one more entry here.
"""
from __future__ import annotations

import yaml

from . import audit as auditmod
from . import bottom_line, decision
from . import calibration as calmod
from . import conditions as condmod
from . import defaults as defaultsmod
from . import drills as drillmod
from . import headline as headmod
from . import scale_curve as scalemod
from . import sections as sec
from . import serving as servemod
from . import ux as uxmod
from .records import RECOVERY_PHASES
from .section import Block, ReportContext, Section
from .stats import PLATFORM_LABEL, base_metric
from .verdicts import findings, method_note, tested_table

# charts shown in their sections, not under "Charts"
OWN_SECTION = {"recovery", "decision", "errors", "drills", "serve_cdf", "serve_timeline", scalemod.CHART}
# the recovery section's table: recovery_s, its phases, and the checkpoint figures beside them
RECOVERY_TABLE = {"recovery_s", *RECOVERY_PHASES, "checkpoint_save_s", "checkpoint_load_s"}
COST_KEYS = {"cost_run_usd", "cost_per_step_usd", "cost_per_step_steady_usd", "recovery_cost_usd", "goodput"}
HARNESS_ERRORS = "Harness errors — not counted against any platform"
HARNESS_ERRORS_WHY = ("These runs stopped because the harness itself raised an unexpected error (a bug in the harness, "
                      "not a failure of the platform or the job); no platform's counts above include them.")
DEFINITIONS = [
    "`queue_s`: submit → all resources allocated; `queue_admission_s` (Kubernetes): submit → Kueue admission.",
    "`startup_s` = `launch_s` + `rendezvous_s` + `first_step_s`: allocation → first step done by every rank, "
    "sweep excluded.",
    "`submit_to_first_step_s` = `queue_s` + `startup_s` per run: submit → first step done by every rank, the edges "
    "every platform stamps the same way (lo and hi: the sums of the two parts'); the report adds it up, the runs "
    "do not store it.",
    "`allreduce_busbw_gbps`: busbw = algbw × 2(n−1)/n (nccl-tests), GB = 1e9 bytes, of the in-place "
    "all-reduce at the largest swept size with a correct result, time averaged across ranks (campaigns made "
    "before 2026-12-03 stored the peak over sizes); `allreduce_avg_busbw_gbps`: "
    "nccl-tests' \"Avg bus bandwidth\" (mean over every size, out-of-place and in-place).",
    "`queue_s:contention`, `queue_admission_s:contention`: the same, for a job submitted while a same-shape "
    "blocking job holds what it needs (Slurm: the blocker runs `--exclusive`; Kubernetes: the ClusterQueue "
    "quota fits one job) until it finishes by itself. `handover_s`: the blocker's last rank done → the "
    "waiting job allocated.",
    "`recovery_s:<fault>`: fault injected → every rank back at the step it had reached before the fault; it "
    "splits into `recovery_detection_s` (→ the scheduler or torchrun notices), `recovery_teardown_s` (→ resources "
    "released), `recovery_rescheduling_s` (→ allocated again), `recovery_restart_s` (→ rendezvous), "
    "`recovery_checkpoint_load_s` and `recovery_recompute_s` (→ back at the pre-fault step). `resume_s`: fault → "
    "every rank's first step of the new attempt (what recovery_s meant in older campaigns). `lost_steps`: "
    "steps redone.",
    "`goodput`: useful training time ÷ wall time the job held its resources (ETTR).",
    "`cost_run_usd`: the price of the resources from submit until they were released again (teardown "
    "included), with the platform's overhead; `cost_per_step_usd` = that / steps; `cost_per_step_steady_usd`: "
    "the rate × median step time; `recovery_cost_usd:<fault>`: the rate × the time the fault took from the job. "
    "Older campaigns billed submit → the last rank's done.",
    "`first_log_s`: submit → the first line of the workload's output the harness could read, as a user would "
    "(harness clock; resolution: the poll interval).",
    "Time to a clear error (user-mistake probes, one per mistake and platform, not training runs): submit → the "
    "first message the platform showed the user that names the problem (the wrong value, or the scheduler's words "
    "for an impossible request); \"not clear within N s\" when none came before the probe's deadline.",
]


# Figures defined only where the report shows them (campaigns stored before them have none, and their
# committed reports regenerate as they were): the metric names each definition is about, and its text.
SHOWN_DEFINITIONS = [
    ({"image_pull_s"},
     "`image_pull_s` (Kubernetes): per pod of the first attempt, how long it waited for its image, as the kubelet "
     "recorded it: 0 where its Pulled event says the image was already present on the node; else the kubelet's own "
     "measured time from its Pulling event (`Successfully pulled image … in A (B including waiting)`: B, queueing "
     "behind other pulls included, to the millisecond; older kubelets' single figure; the two events' whole "
     "seconds where the message has none or the pull was tried more than once). The figure is the slowest pod's: "
     "the job starts when the last pod has its image. Each run keeps every pod's node, image, source (already "
     "present or pulled), bytes and message, and `pre_staged` (every pod had the image already). It is part of "
     "`launch_s` (allocated → every rank's process started), not added to it. Slurm has no such figure: pyxis "
     "imports the image inside `srun` before the task starts (its \"pyxis: importing docker image\" line has no "
     "time), so the import lies inside `launch_s` there (and `step_launch_s` where the batch script stamped srun's "
     "start); pre-stage it with a `.sqsh` path in `slurm.container_image` (`enroot import -o`), or give apptainer a "
     "`.sif`, which it does not pull."),
    ({"checkpoint_save_s", "checkpoint_load_s"},
     "`checkpoint_save_s`: the median over the run's checkpoints of the workload's save time (rank 0: torch.save "
     "of the model and optimizer state to a temporary file and its rename into place; rotation not counted), "
     "with n, the slowest, the file's size and file system, and GB/s = bytes ÷ save time (GB = 1e9 bytes, median "
     "over the saves); saves fall between steps, outside every step time. `checkpoint_load_s:<fault>`: the "
     "restart's checkpoint read (torch.load and load_state_dict of the model and optimizer), the slowest rank's, "
     "with its size, file system and GB/s. It is part of `recovery_checkpoint_load_s` (rendezvous → every rank "
     "loaded, which also builds the model and wraps it in DDP) and is not added to `recovery_s` again."),
    ({"samples_per_s", "tokens_per_s", "mfu"},
     "`samples_per_s` (the MLP workload): per-rank batch × ranks ÷ the median step time (`step_time_s`). "
     "`tokens_per_s` (the transformer): per-rank batch × seq_len × ranks ÷ the median step time. `mfu` (the "
     "transformer on GPUs, in bf16): `tokens_per_s` × model FLOPs per token ÷ (the GPU's dense bf16 tensor peak "
     "× GPUs); FLOPs per token = 6 × parameters + 12 × layers × d_model × seq_len (PaLM, Chowdhery et al. 2022, "
     "appendix B; the causal mask not discounted), the peak from NVIDIA's datasheets by the device's name. None "
     "for a CPU run, a GPU not in the table, or a run not in bf16 (the run's record says which)."),
    ({"straggler_ratio"},
     "`straggler_ratio`: per rank the median forward-pass time (`fwd_s`, CUDA events on GPUs) of the first "
     "attempt's steps (first step dropped); the slowest rank's ÷ the median of the ranks' (1.0: no rank "
     "slower), naming the slowest rank and its host. Not from step times: under synchronous DDP every rank "
     "waits for the slowest in each step's all-reduce, so step times are near equal on every rank (runs "
     "recorded before `fwd_s` fall back to them and say so). The calibration phase's per-node matmul rate "
     "names a slow node before the run."),
]


# Cost rule 2 (metrics/cost.py COST_RULES): where a platform's runs were billed by it, its definition says so beside
# the one older campaigns' reports keep
COST_RULE_2 = ("Cost rule 2 (runs whose cost detail says `rule = 2`): billed from each attempt's allocation until "
               "its resources were released, summed over attempts; the queue (`queue_wait_s`) and a requeue's wait "
               "(`between_attempts_s`) are in the detail, not billed.")


def definitions(ctx: ReportContext) -> list[str]:
    """DEFINITIONS, with the calibration figures' where the campaign calibrated: a campaign without the
    phase shows none of them, so the committed reports regenerate as they were; likewise SHOWN_DEFINITIONS,
    and cost rule 2's where some platform's runs were billed by it."""
    shown = {base_metric(s.metric) for s in ctx.summary}
    rule2 = any((d or {}).get("rule") == 2 for d in ctx.table.pricing.values())
    return (DEFINITIONS + ([COST_RULE_2] if rule2 else [])
            + [text for names, text in SHOWN_DEFINITIONS if names & shown]
            + (calmod.DEFINITIONS if calmod.applies(ctx.table) else []))


def _label(p: str) -> str:
    return PLATFORM_LABEL.get(p, p)


def _only(parts: list[tuple[str, list]]) -> list[Block]:
    # the scenario modules return [(title, blocks)], or [] where their registry entry says it does not apply
    return [b for _, blocks in parts for b in blocks]


def settings_blocks(label: str, settings: dict) -> list[Block]:
    """A platform's recorded settings: plain values as a list, nested ones (node lists, quotas, the Slurm
    configuration) as YAML, never as a Python repr."""
    plain = [f"`{k}`: {'–' if v is None else v}" for k, v in settings.items() if not isinstance(v, dict | list)]
    nested = {k: v for k, v in settings.items() if isinstance(v, dict | list)}
    out: list[Block] = [("h3", label)]
    if plain:
        out.append(("ul", plain))
    if nested:
        out.append(("pre", yaml.safe_dump(nested, sort_keys=False, allow_unicode=True, width=100).rstrip()))
    return out


def _bottom_line(ctx: ReportContext) -> list[Block]:
    blocks = bottom_line.section(ctx.decision_rows, ctx.table, ctx.groups, ctx.comparisons, ctx.host, ctx.design)[1]
    notes = [("p", f"Noted with the campaign: {n}") for n in ctx.notes]
    return blocks[:1] + notes + blocks[1:] if notes else blocks


def _decision(ctx: ReportContext) -> list[Block]:
    ledger = decision.ledger_table(ctx.decision_rows)
    return ([("table", decision.table_of(ctx.decision_rows))]
            + [("p", s) for s in decision.reading(ctx.decision_rows, ctx.table)]
            + ([("h3", "Conditions ledger: what each platform ran under"), ("table", ledger),
                ("p", LEDGER_NOTE)] if ledger[1] else [])
            + [("img", ("decision", ctx.charts["decision"]))])


LEDGER_NOTE = ("Read from the runs' own records (report/conditions.py): the caps from the pods, containers and job of "
               "one successful training run of each platform, the settings from the runs' environment, the host's "
               "load from each run's samples (harness/hostload.py). A condition marked **no** differed between the "
               "platforms and may show in the figure as much as the scheduler does. A run's host counts as busy "
               f"when its 1-min load average passed {condmod.BUSY_LOAD_PER_CPU:g} a CPU, other processes took more "
               f"than {condmod.BUSY_OTHER_SHARE:.0%} of its CPU time, or the hypervisor stole more than "
               f"{condmod.BUSY_STEAL:.0%}.")


def _headline(ctx: ReportContext) -> list[Block]:
    header, head_rows, rare_rows = headmod.table(ctx.summary, ctx.comparisons)
    blocks: list[Block] = [("table", (header, head_rows))] if head_rows else []
    if rare_rows:
        blocks.append(("details", (headmod.rare_summary(rare_rows), [("table", (header, rare_rows))])))
    return blocks or [("p", "_No successful runs yet._")]


def _findings(ctx: ReportContext) -> list[Block]:
    return [("ul", findings(ctx.comparisons, {(p, k): g.resolution for (p, k), g in ctx.groups.items()}))]


def _verdicts(ctx: ReportContext) -> list[Block]:
    tested = tested_table(ctx.comparisons)
    return ([("table", tested)] if tested[1] else []) + [("ul", method_note(ctx.comparisons))]


def _recovery(ctx: ReportContext) -> list[Block]:
    phases = sec.metric_table(ctx.summary, lambda k: base_metric(k) in RECOVERY_TABLE)
    return [("table", phases), ("img", ("recovery", ctx.charts["recovery"]))]


def _at_defaults(ctx: ReportContext) -> list[Block]:
    return _only(defaultsmod.section(ctx.at_defaults, _label))


def _cost_rows(ctx: ReportContext) -> tuple[list[str], list[list[str]]]:
    return sec.metric_table(ctx.summary, lambda k: base_metric(k) in COST_KEYS)


def _cost(ctx: ReportContext) -> list[Block]:
    pricing = sec.pricing_lines(ctx.table)
    rows = _cost_rows(ctx)
    return (([("p", "Pricing model:"), ("ul", pricing)] if pricing else [])
            + ([("table", rows)] if rows[1] else []))


def _scale(ctx: ReportContext) -> list[Block]:
    return scalemod.section(ctx.table, ctx.charts.get(scalemod.CHART))


def _drills(ctx: ReportContext) -> list[Block]:
    return _only(drillmod.section(ctx.drills, ctx.summary, ctx.charts.get("drills")))


def _serving(ctx: ReportContext) -> list[Block]:
    return _only(servemod.section(ctx.serves, ctx.charts))


def _ux(ctx: ReportContext) -> list[Block]:
    job = uxmod.job_table(ctx.table, uxmod.first_log_rows(ctx.summary))
    errors = uxmod.error_table(ctx.table)
    blocks: list[Block] = ([("h3", "The same clean job"), ("table", job), ("p", uxmod.NOTE_JOB)]
                           if len(job[0]) > 1 else [])
    if errors[1]:
        blocks += [("h3", "Time to a clear error"), ("table", errors), ("p", uxmod.NOTE_ERRORS),
                   ("img", ("errors", ctx.charts["errors"]))]
    return blocks


def _audit(ctx: ReportContext) -> list[Block]:
    return ([b for label, t, kept in auditmod.tables(ctx.table)
             for b in (("h3", label), ("table", t), ("p", "How long those records are kept:"), ("table", kept))]
            + [("p", auditmod.NOTE)])


def _calibration(ctx: ReportContext) -> list[Block]:
    return calmod.section(calmod.load(ctx.results_dir, ctx.table))


def _charts(ctx: ReportContext) -> list[Block]:
    return [("img", (k, p)) for k, p in ctx.charts.items() if k not in OWN_SECTION]


def _settings(ctx: ReportContext) -> list[Block]:
    return [b for plat in sec.platforms(ctx.table)
            for b in settings_blocks(_label(plat), ctx.table.settings.get(plat, {}))]


def _failed(ctx: ReportContext) -> list[Block]:
    return [("ul", [f"`{r.run_id}` ({r.status}) at stage `{r.stage}`: {r.message}" for r in sec.failed(ctx.table)])]


def _harness_errors(ctx: ReportContext) -> list[Block]:
    return [("p", HARNESS_ERRORS_WHY), ("ul", [
        f"`{r.run_id}` ({_label(r.platform)}) at stage `{r.stage}`: {r.type}: {r.message}"
        for r in sec.harness_errors(ctx.table)])]


REGISTRY: tuple[Section, ...] = (
    Section(bottom_line.TITLE, _bottom_line),
    Section("Decision summary: Kubernetes or Slurm for this job", _decision),
    Section("Headline", _headline),
    Section("What the numbers say", _findings),
    Section("How verdicts are drawn", _verdicts, lambda ctx: bool(ctx.comparisons)),
    # the phases chart is drawn only where fault runs measured recovery
    Section("Recovery broken down", _recovery, lambda ctx: "recovery" in ctx.charts),
    Section(defaultsmod.TITLE, _at_defaults, lambda ctx: bool(ctx.at_defaults)),
    Section("Cost and goodput", _cost, lambda ctx: bool(sec.pricing_lines(ctx.table) or _cost_rows(ctx)[1])),
    # only where the campaign ran the scale curve (config scale.nodes): its runs are in no other figure
    Section(scalemod.TITLE, _scale, lambda ctx: scalemod.applies(ctx.table)),
    Section(drillmod.TITLE, _drills, lambda ctx: bool(ctx.drills)),
    Section(servemod.TITLE, _serving, lambda ctx: bool(ctx.serves)),
    Section("User experience", _ux, lambda ctx: bool(_ux(ctx))),
    Section("Auditing", _audit, lambda ctx: bool(auditmod.tables(ctx.table))),
    # only where runs calibrated (config calibration.enabled); calibration_s stays out of the headline: it is
    # the harness's phase, not the scheduler's (report/calibration.py says why)
    Section(calmod.TITLE, _calibration, lambda ctx: calmod.applies(ctx.table)),
    Section("Charts", _charts),
    Section("Settings that shaped the numbers", _settings),
    Section("Caveats", lambda ctx: [("ul", sec.caveats(ctx.table))]),
    Section("Runs that did not succeed", _failed, lambda ctx: bool(sec.failed(ctx.table))),
    Section(HARNESS_ERRORS, _harness_errors, lambda ctx: bool(sec.harness_errors(ctx.table))),
    Section("Definitions", lambda ctx: [("ul", definitions(ctx))]),
)
