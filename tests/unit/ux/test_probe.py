"""The user-experience probes' pure parts: the mistakes as config changes, what counts as a clear
message (fed with the messages the real clusters gave, recorded under tests/fixtures/*/mistakes/),
the probe runner against a scripted backend replaying a recorded timeline, what a user writes for
the committed campaign's jobs, and first_log_s from a committed run's own events."""
from __future__ import annotations

import json
from typing import ClassVar

import pytest
from support.paths import FIXTURES, ROOT

from harness import config, evidence, footprint
from harness.backends.base import Backend, Collected, Handle, Observation, Rendered
from harness.config.ux import MISTAKES
from harness.errors import BackendError, ConfigError
from harness.metrics.common import normalise
from harness.metrics.timing import first_log
from harness.states import JobState
from harness.store import Store, load_events, load_raw
from harness.ux import clear, mistakes, probe

COMMITTED = ROOT / "results" / "smoke-2026-12-03" / "smoke-poc" / "runs"
TENANT = {"kubeconfig": "/tmp/restricted-kubeconfig", "namespace": "poc-gpu", "local_queue": "poc-gpu-queue",
          "image": "k8s-slurm-poc/worker:bookworm-abc", "image_pull_policy": "Never"}


def base_cfg(**over) -> config.Config:
    return config.from_mapping({"campaign": "ux", "platforms": ["slurm", "k8s"], "faults": [], **over})


def _flat(d: dict, pre: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{pre}{k}."))
        else:
            out[f"{pre}{k}"] = v
    return out


CHANGED = {
    ("impossible_resources", "slurm"): {"resources.gpus_per_node", "resources.procs_per_node",
                                        "workload.simulated_gpus"},
    ("impossible_resources", "k8s"): {"resources.gpus_per_node", "resources.procs_per_node",
                                      "workload.simulated_gpus"},
    ("missing_image", "slurm"): {"slurm.venv"},
    ("missing_image", "k8s"): {"kubernetes.image"},
    ("wrong_queue", "slurm"): {"slurm.partition"},
    ("wrong_queue", "k8s"): {"kubernetes.local_queue"},
    ("entrypoint_typo", "slurm"): set(),
    ("entrypoint_typo", "k8s"): set(),
    ("missing_checkpoint_volume", "slurm"): {"slurm.checkpoint_dir"},
    ("missing_checkpoint_volume", "k8s"): {"kubernetes.checkpoint_pvc"},
}


@pytest.mark.parametrize("kind,platform", sorted(CHANGED))
def test_each_mistake_is_a_valid_config_with_only_its_own_change(kind, platform):
    cfg = base_cfg()
    m = mistakes.make(cfg, platform, kind, worker_image="k8s-slurm-poc/worker:bookworm-abc")
    before, after = _flat(cfg.model_dump(mode="json")), _flat(m.cfg.model_dump(mode="json"))
    changed = {k for k in after if after[k] != before.get(k)}
    assert changed == CHANGED[(kind, platform)]
    assert m.wrong and m.change
    assert (m.entrypoint == mistakes.ENTRYPOINT_TYPO) == (kind == "entrypoint_typo")
    if kind == "missing_image" and platform == "k8s":
        assert m.cfg.kubernetes.image == "k8s-slurm-poc/worker:does-not-exist"


def test_a_missing_image_on_a_container_slurm_site_is_its_image_not_a_venv():
    cfg = base_cfg(slurm={"container": "pyxis", "container_image": "nvcr.io/nvidia/pytorch:24.05-py3"})
    m = mistakes.make(cfg, "slurm", "missing_image")
    assert m.cfg.slurm.container_image == "nvcr.io/nvidia/pytorch:does-not-exist"
    assert m.cfg.slurm.venv is None


def test_the_probes_run_as_the_configured_identity_and_the_hash_ignores_who():
    cfg = base_cfg(ux={"mistakes": ["wrong_queue"], "kubernetes": TENANT})
    m = mistakes.make(cfg, "k8s", "wrong_queue")
    assert m.cfg.kubernetes.namespace == "poc-gpu" and m.cfg.kubernetes.kubeconfig == TENANT["kubeconfig"]
    assert m.cfg.kubernetes.local_queue == "poc-gpu-queue-typo" == m.wrong
    # Slurm's probes are untouched by the Kubernetes identity
    assert mistakes.make(cfg, "slurm", "wrong_queue").cfg.kubernetes.namespace == "poc"
    other = base_cfg(ux={"mistakes": ["wrong_queue"], "kubernetes": {**TENANT, "kubeconfig": "/elsewhere"}})
    assert cfg.config_hash() == other.config_hash()
    assert "restricted-kubeconfig" not in json.dumps(cfg.redacted()).replace("<redacted>/restricted-kubeconfig", "")


def test_bad_ux_settings_are_refused_with_the_choices():
    with pytest.raises(ConfigError, match="unknown mistake 'typo'"):
        base_cfg(ux={"mistakes": ["typo"]})
    with pytest.raises(ConfigError, match="may override only"):
        base_cfg(ux={"kubernetes": {"max_restarts": 9}})
    with pytest.raises(ConfigError, match="unknown mistake"):
        mistakes.make(base_cfg(), "k8s", "nope")


def test_the_plan_has_one_probe_per_mistake_on_scheduler_platforms_only():
    from harness.scenarios import plan
    cfg = base_cfg(platforms=["local", "slurm", "k8s"], ux={"mistakes": list(MISTAKES)})
    assert [p.scenario for p in plan(cfg, "local")] == ["clean"]
    probes = [p for p in plan(cfg, "k8s") if p.scenario.startswith("mistake:")]
    assert [p.run_id for p in probes] == [f"k8s-mistake-{k.replace('_', '-')}" for k in MISTAKES]


def _recorded() -> list[tuple[str, str, dict]]:
    out = []
    for plat in ("k8s", "slurm"):
        for p in sorted((FIXTURES / plat / "mistakes").glob("*.json")):
            d = json.loads(p.read_text())
            if d.get("kind") in MISTAKES and d.get("timeline"):
                out.append((plat, d["kind"], d))
    return out


RECORDED = _recorded()


def test_there_are_recorded_mistakes_to_learn_from():
    assert {k for p, k, _ in RECORDED if p == "k8s"} >= {"impossible_resources", "missing_image", "wrong_queue",
                                                          "entrypoint_typo"}


@pytest.mark.parametrize("plat,kind,rec", RECORDED, ids=[f"{p}-{k}" for p, k, _ in RECORDED])
def test_the_real_clusters_first_clear_message_is_clear_and_the_noise_before_it_is_not(plat, kind, rec):
    wrong = mistakes.make(base_cfg(), plat, kind, worker_image="k8s-slurm-poc/worker:bookworm-abc").wrong
    v = clear.verdict(rec["timeline"], kind, wrong)
    assert v["clear"], rec["timeline"]
    first = rec["timeline"].index(next(m for m in rec["timeline"] if m["text"] == v["message"]))
    for m in rec["timeline"][:first]:
        assert not clear.is_clear(kind, wrong, m["text"]), m


def test_vague_messages_are_not_clear():
    assert not clear.is_clear("impossible_resources", "64", "(Resources)")
    assert not clear.is_clear("wrong_queue", "gpu-typo", "Pending")
    assert clear.is_clear("impossible_resources", "64",
                          "sbatch: error: Batch job submission failed: Requested node configuration is not available")


class Replay(Backend):
    """A scripted backend for the runner's logic: it shows a recorded timeline's messages once the
    simulated clock passes their at_s (after submit), or refuses at submit."""
    platform = "k8s"

    def __init__(self, timeline: list[dict], clock, refuse: str | None = None):
        self.timeline, self.clock, self.refuse = timeline, clock, refuse
        self.cancelled: list[str] = []
        self.calls = {"LIST events": 0}
        self.t0 = None

    def render(self, spec):
        return Rendered("k8s", {"jobset.yaml": f"kind: JobSet\nentry: {spec.entrypoint}\n"})

    def preflight(self):
        return {}

    def submit(self, spec, rendered):
        if self.refuse:
            raise BackendError(self.refuse)
        self.t0 = self.clock()
        return Handle("k8s", spec.run_id, [spec.run_id], self.t0)

    def observe(self, handles):
        return {h.run_id: Observation(JobState.PENDING) for h in handles}

    def user_view(self, handle):
        self.calls["LIST events"] += 1
        now = self.clock() - self.t0
        return [{"source": m["source"], "text": m["text"]} for m in self.timeline if m["at_s"] <= now]

    def call_counts(self):
        return dict(self.calls)

    def inject(self, *a, **k):
        raise AssertionError("no faults in a probe")

    def collect(self, handle):
        return Collected([], {}, [], logs={"status.txt": "pending"}, raw={"jobset": {"kind": "JobSet"}})

    def cancel(self, handle):
        self.cancelled.append(handle.run_id)


class Clock:
    def __init__(self):
        self.t = 1_000.0

    def __call__(self):
        return self.t

    def sleep(self, s):
        self.t += s


def _run(tmp_path, backend_of, kind="wrong_queue", deadline=150, **kw):
    cfg = base_cfg(ux={"mistakes": [kind], "deadline_s": deadline})
    store = Store(tmp_path, cfg.campaign)
    store.open(cfg.config_hash(), cfg.redacted(), resume=False)
    clock = Clock()
    backend = backend_of(clock)
    rec = probe.run(cfg, "k8s", f"k8s-mistake-{kind}", kind, store, lambda p, c: backend, poll_s=1.0,
                    clock=clock, sleep=clock.sleep, **kw)
    store.close()
    return rec, backend, store


def test_the_probe_stops_at_the_first_clear_message_and_cancels(tmp_path):
    rec_k8s = {k: d for p, k, d in RECORDED if p == "k8s"}["wrong_queue"]
    rec, backend, store = _run(tmp_path, lambda clock: Replay(rec_k8s["timeline"], clock))
    m = rec["mistake"]
    assert rec["status"] == "ok" and m["clear"] and not m["at_submit"]
    assert m["message"] == "LocalQueue poc-queue-typo doesn't exist"
    assert m["time_to_error_s"] == 2.0       # looks at 0 s and 1 s miss it (recorded at 1.08 s); the 2 s look sees it
    assert rec["metrics"]["time_to_error_s:wrong_queue"]["lo"] == 1.0
    assert backend.cancelled == ["k8s-mistake-wrong_queue"]
    assert rec["ux"]["calls"]["watch"] == {"LIST events": 3}
    assert not list((store.root / "inflight").glob("*.json"))
    assert load_raw(store.run_dir(rec["run_id"]))["user_view"] == m["messages"]
    stored = [json.loads(line) for line in store.runs_path.read_text().splitlines()]
    assert stored[-1]["mistake"]["message"] == m["message"]


class _Host:
    """A host sampler that says what it saw: started before the probe, stopped once for its record."""
    looks: ClassVar[list[str]] = []

    def start(self):
        self.looks.append("start")
        return self

    def stop(self):
        self.looks.append("stop")
        return {"version": 1, "during": {"load1_max": 3.5}}

    def close(self):
        self.looks.append("close")


def test_a_probe_record_carries_the_hosts_load_like_every_run(tmp_path):
    rec_k8s = {k: d for p, k, d in RECORDED if p == "k8s"}["wrong_queue"]
    _Host.looks = []
    rec, _, store = _run(tmp_path, lambda clock: Replay(rec_k8s["timeline"], clock), host_sampler=_Host)
    assert rec["host_load"] == {"version": 1, "during": {"load1_max": 3.5}}
    assert json.loads(store.runs_path.read_text().splitlines()[-1])["host_load"]["during"]["load1_max"] == 3.5
    assert _Host.looks == ["start", "stop", "close"]


def test_a_refusal_at_submit_is_the_clear_error_at_once(tmp_path):
    text = "sbatch: error: Batch job submission failed: Requested node configuration is not available"
    rec, backend, _ = _run(tmp_path, lambda clock: Replay([], clock, refuse=text), kind="impossible_resources")
    m = rec["mistake"]
    assert m["clear"] and m["at_submit"] and m["time_to_error_s"] == 0.0 and m["message"] == text
    assert backend.cancelled == []   # nothing was submitted


def test_no_clear_message_before_the_deadline_is_recorded_as_such(tmp_path):
    noise = [{"at_s": 0.0, "source": "JobSet condition Suspended", "text": "jobset is suspended"}]
    rec, backend, _ = _run(tmp_path, lambda clock: Replay(noise, clock), deadline=5)
    m = rec["mistake"]
    assert rec["status"] == "ok" and not m["clear"] and m["time_to_error_s"] is None
    assert "metrics" not in rec and m["first_message_s"] == 0.0 and len(m["messages"]) == 1
    assert backend.cancelled == [rec["run_id"]]


def _rendered(run: str) -> dict[str, str]:
    return {p.name: p.read_text() for p in (COMMITTED / run / "rendered").iterdir()}


def test_what_the_user_writes_for_the_committed_campaigns_job():
    k8s, slurm = footprint.written(_rendered("k8s-clean-01")), footprint.written(_rendered("slurm-clean-01"))
    assert (k8s["job_files"], k8s["job_lines"], k8s["job_objects"]) == (1, 151, 1)
    assert k8s["files"]["rbac.yaml"]["role"] == "admin" and k8s["files"]["kueue.yaml"]["objects"] == 4
    assert (slurm["job_files"], slurm["job_lines"], slurm["job_objects"]) == (1, 76, 1)
    assert 0 < slurm["job_code_lines"] < slurm["job_lines"]


def test_calls_are_grouped_by_what_the_user_does():
    from harness.afterrun import calls_by_phase
    stages = [{"name": "render"}, {"name": "submit", "calls": {"sbatch": 1}}, {"name": "queue", "calls": {"squeue": 3}},
              {"name": "run", "calls": {"squeue": 5, "cat": 9}}, {"name": "fault:kill_rank", "calls": {"srun": 1}},
              {"name": "collect", "calls": {"sacct": 2, "cat": 1}}]
    assert calls_by_phase(stages, {"scancel": 1}) == {
        "submit": {"sbatch": 1}, "watch": {"squeue": 8, "cat": 9}, "logs": {"sacct": 2, "cat": 1},
        "cancel": {"scancel": 1}}


@pytest.mark.parametrize("run", ["k8s-clean-01", "slurm-clean-01"])
def test_first_log_of_a_committed_run_lies_between_written_and_read(run):
    events = load_events(COMMITTED / run)
    st = normalise(evidence.to_json(evidence.stamps(run.split("-")[0], load_raw(COMMITTED / run))))
    m = first_log(events, st)
    first = min((e for e in events if e.get("observed_at") is not None), key=lambda e: e["observed_at"])
    assert m["value"] == pytest.approx(first["observed_at"] - st["submitted"].t, abs=st["submitted"].width)
    assert m["lo"] <= m["value"] <= m["hi"] and 0 < m["value"] < 120
    assert m["hi"] - m["lo"] >= first["observed_at"] - first["ts_ns"] / 1e9 - 1e-6


def test_poc_rederive_rederives_a_probe_from_the_messages_it_kept_and_catches_an_edit(tmp_path):
    from harness import rederive
    rec_k8s = {k: d for p, k, d in RECORDED if p == "k8s"}["wrong_queue"]
    rec, _, store = _run(tmp_path, lambda clock: Replay(rec_k8s["timeline"], clock))
    [c] = rederive.check(tmp_path)
    assert c.checked == [rec["run_id"]] and c.findings == []
    edited = dict(rec, metrics={"time_to_error_s:wrong_queue": {"value": 0.5}})
    edited["mistake"] = dict(rec["mistake"], source="somewhere else")
    found = rederive.check_run(edited, store.run_dir(rec["run_id"]), {}, None, None)
    assert {(f.metric, f.field) for f in found} == {("mistake", "source"), ("time_to_error_s:wrong_queue", "value")}


def test_poc_render_shows_a_probe_with_its_mistake_in_it(tmp_path, capsys):
    from harness.cli import main
    cfg = tmp_path / "ux.yaml"
    cfg.write_text("campaign: ux\nplatforms: [slurm, k8s]\nfaults: []\n"
                   "ux: {mistakes: [wrong_queue, missing_checkpoint_volume]}\n")
    assert main(["render", "--config", str(cfg), "--platform", "k8s", "--run-id", "k8s-mistake-wrong-queue"]) == 0
    assert "kueue.x-k8s.io/queue-name: poc-queue-typo" in capsys.readouterr().out
    assert main(["render", "--config", str(cfg), "--platform", "slurm", "--run-id",
                 "slurm-mistake-missing-checkpoint-volume"]) == 0
    out = capsys.readouterr().out
    assert f"--ckpt-dir {mistakes.MISSING_CKPT_DIR}/ux/slurm-mistake-missing-checkpoint-volume" in out
    assert main(["render", "--config", str(cfg), "--platform", "k8s"]) == 0       # the clean job is untouched
    assert "queue-name: poc-queue\n" in capsys.readouterr().out
