"""Kubernetes: a suspended JobSet labelled for a Kueue LocalQueue, observed through watches.

The backend takes its API client (``K8sClient``) as a constructor argument, as the Slurm backend
takes its transport. Where each number comes from is in ``state.py``; workload events (startup,
all-reduce, steps, recovery) are read from the pods' logs (``logs.py``), and on the local cluster
also from the run's checkpoint volume, where the workload writes the same lines.

JobSets, Workloads and Pods are watched (one list + watch per kind and namespace, ``watch.py``);
a poll (observe) reads those caches, and lists each kind once instead when a cache is out of sync.
"""
from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from ... import events as evmod
from ...config import Config, Kubernetes
from ...errors import BackendError, ConfigError, SubmitError
from ...paths import NATIVE_K8S_CLUSTER, cluster_state_dir
from ...render import jobset as rj
from ...spec import JobSpec, build, campaign_dir
from ...states import JobState
from .. import identity
from ..base import (
    Backend,
    Collected,
    FaultRecord,
    Handle,
    Journal,
    Observation,
    Rendered,
    keep_reason,
    no_journal,
    require_destructive_allowed,
)
from . import cleanup, evidence_raw, faults, ownership, preflight, records
from . import state as st
from .api import CONFLICT, JOBSETS, K8sClient, api_message, is_connection_error, retry_webhook
from .logfollow import Followers
from .logs import PodLog
from .watch import Looks

LOG_PHASES = ("Running", "Succeeded", "Failed")
ALLOCATABLE_TTL_S = 5.0
LEDGER = ".lost-nodes.json"     # beside the checkpoints: nodes powered off and not yet back (local cluster)


@dataclass
class _RunState:
    """What observe() has learnt about one run (kept between polls)."""
    unseen: evmod.Unseen = field(default_factory=evmod.Unseen)
    logs: dict[str, PodLog] = field(default_factory=dict)      # pod name -> its log so far
    followed: set = field(default_factory=set)                  # pods whose log a thread follows
    final_read: set = field(default_factory=set)                # ended pods read once more after their stream
    log_errors: dict[str, str] = field(default_factory=dict)   # pod name -> the last log read's error
    attempts: dict = field(default_factory=dict)                # restart attempt -> {'allocated', 'pods', ...}
    times: dict = field(default_factory=dict)
    raw: evidence_raw.RawKeeper = field(default_factory=evidence_raw.RawKeeper)   # last copies, for collect


def kubeconfig_path(configured: str | None) -> str:
    """kubectl's choice: the configured file, else the first file in $KUBECONFIG, else ~/.kube/config."""
    if configured:
        return str(Path(os.path.expandvars(configured)).expanduser())
    env = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    # kubectl merges every file in $KUBECONFIG; the official client loads one: the first that exists
    for p in env:
        if Path(p).expanduser().is_file():
            return str(Path(p).expanduser())
    return str(Path(env[0]).expanduser()) if env else str(Path.home() / ".kube" / "config")


class KubernetesBackend(Backend):
    platform = "k8s"
    # a poll reads the watch caches and drains the log followers (no API call in the steady state),
    # so polling often costs little and lets faults land close to their target step
    poll_s = 0.25

    def __init__(self, cfg: Kubernetes, client: K8sClient, *, image: str, checkpoint_root: str,
                 checkpoint_pvc: str | None = None, local_cluster: bool = False, setup_spec: JobSpec | None = None,
                 queue_jobs: int = 1, query_budget: int = 5, use_watches: bool = True, follow_logs: bool = True,
                 power=None, trace=None, node_faults: bool = False, allow_destructive_faults: bool = False,
                 serving_rbac: bool = False):
        self.cfg = cfg
        self.allow_destructive_faults = allow_destructive_faults   # the config's opt-in, checked again at inject
        self.node_faults = node_faults      # a lose_node fault is configured (and allowed): RBAC for nodes
        self.serving_rbac = serving_rbac    # the serving scenario runs: RBAC for its Deployment and Service
        self.client = client
        self.image = image
        self.checkpoint_root = checkpoint_root
        self.checkpoint_pvc = checkpoint_pvc
        self.local = local_cluster          # the native cluster on this host: setup and node faults allowed
        self.power = power                  # harness.clusters.native_power on the local cluster, else None
        self.setup_spec = setup_spec
        self.queue_jobs = queue_jobs
        self.query_budget = query_budget
        self._runs: dict[str, _RunState] = {}
        self._failed_polls = 0
        self.looks = Looks(client, use_watches)
        self._alloc: tuple[float, list[dict] | None] | None = None   # (when, nodes' allocatable)
        self.setup_report: dict = {}
        self._identity: dict | None = None
        self.trace = trace                  # trace(run_id, look): each look at a run's objects, as observed
        self.follow_logs = follow_logs      # follow running pods' logs (events arrive as written) or poll them
        # requests made outside client.call() are counted too (a recorded client for pure tests may not count)
        self._count = getattr(client, "count", None) or (lambda what, n=1: None)
        self.followers = Followers(client.own_core, rj.CONTAINER, count=self._count)

    @classmethod
    def from_config(cls, cfg: Config) -> KubernetesBackend:
        """No cluster contact: the kubeconfig is read on the first API call."""
        k = cfg.kubernetes
        local = k.native
        native_root = cluster_state_dir(NATIVE_K8S_CLUSTER)
        kubeconfig = str(native_root / "kubeconfig") if local else kubeconfig_path(k.kubeconfig)
        image = k.image
        if image is None:
            if not local:
                raise ConfigError("kubernetes.image is not set: a cluster other than this machine's native one "
                                  "cannot run the locally built CPU worker image",
                                  tip="set kubernetes.image to an image with python3 and torch that the cluster's "
                                      "nodes can pull (e.g. nvcr.io/nvidia/pytorch:24.05-py3), or use "
                                      "kubeconfig: native for the local cluster")
            from ...clusters import images  # the ref is a content hash of the image recipe: no docker call
            image = images.worker_ref()
        ckpt = os.path.expandvars(os.path.expanduser(k.checkpoint_host_path)) if k.checkpoint_host_path \
            else str(native_root / "checkpoints")
        power = None
        if local:
            from ...clusters import native_power as power
        return cls(k, K8sClient(kubeconfig, k.context), image=image, checkpoint_root=ckpt,
                   checkpoint_pvc=k.checkpoint_pvc, local_cluster=local, power=power,
                   # the campaign's largest job (a scale curve's largest size): the local queue's quota
                   # admits it, and preflight refuses a user's queue whose quota cannot
                   setup_spec=replace(build(cfg, "k8s", "k8s-setup", None),
                                      nodes=cfg.scale.most_nodes("k8s", cfg.resources.nodes)),
                   node_faults=cfg.allow_destructive_faults and (any(f.kind == "lose_node" for f in cfg.faults) or (
                       cfg.serve.enabled and "node_loss" in cfg.serve.faults)),
                   allow_destructive_faults=cfg.allow_destructive_faults, serving_rbac=cfg.serve.enabled)

    def render(self, spec: JobSpec) -> Rendered:
        job = rj.render_jobset(spec, self.cfg, self.image, self.checkpoint_root, self.checkpoint_pvc)
        setup = rj.setup_objects(spec, self.cfg, self.queue_jobs, node_faults=self.node_faults,
                                 serving=self.serving_rbac)
        files = {"jobset.yaml": rj.to_yaml([job.jobset]),
                 "workload-configmap.yaml": rj.to_yaml([job.configmap]),
                 "kueue.yaml": rj.to_yaml(o for o in setup if o["apiVersion"].startswith("kueue")
                                          or o["kind"] == "Namespace"),
                 "rbac.yaml": rj.rbac_note(self.cfg, self.node_faults) + rj.to_yaml(
                     o for o in setup if o["apiVersion"].startswith(("rbac", "v1", "admissionregistration"))
                     and o["kind"] != "Namespace")}
        return Rendered("k8s", files, payload=job)

    def preflight(self) -> dict:
        if self.local:
            self.setup_report = self.setup_local()
        return preflight.check(self.client, self.cfg, image=self.image, local=self.local,
                               checkpoint=({"pvc": self.checkpoint_pvc} if self.checkpoint_pvc
                                           else {"host_path": self.checkpoint_root}),
                               setup=self.setup_report, spec=self.setup_spec)

    def setup_local(self) -> dict:
        """The local cluster only: nodes a crashed campaign left powered off come back; then the
        namespace, Kueue queues and the worker image (see local_setup.py)."""
        from .local_setup import setup_local
        preflight.require_crds(self.client)
        restored = self.restore_lost_nodes()
        report = setup_local(self.client, rj.setup_objects(self.setup_spec, self.cfg, self.queue_jobs),
                             self.cfg.namespace, import_image=self.cfg.image is None)
        report["restored_nodes"] = restored
        return report

    # ------------------------------------------------------------------ submit
    def intent(self, spec: JobSpec, rendered: Rendered) -> Handle:
        job: rj.K8sJob = rendered.payload
        data = {"intent": True, "namespace": job.namespace, "name": job.name, "uid": None,
                "configmap": job.configmap["metadata"]["name"], "campaign": spec.campaign, "owner": spec.owner,
                "owner_mark": spec.owner_mark, "cluster": self.cluster_identity(),
                "checkpoint_path": job.checkpoint_path, "checkpoint_pvc": job.checkpoint_pvc,
                "lost_nodes": [], "cordoned": []}
        return Handle("k8s", spec.run_id, [f"{job.namespace}/{job.name}"], time.time(), data=data)

    def submit(self, spec: JobSpec, rendered: Rendered) -> Handle:
        job: rj.K8sJob = rendered.payload
        c = self.client
        core, ns = c.core(), job.namespace
        owner = ownership.check_owner(spec.owner)
        self.looks.owner = owner     # the watches select the campaign's own objects
        # a resumed campaign re-runs from scratch: remove a leftover of the same run and its checkpoints,
        # only if it is this campaign's own (its poc/owner label, ownership.py); someone else's of the same
        # name (another user's campaign of the same name included) is refused, nothing touched
        cm = job.configmap["metadata"]["name"]
        left = c.get("GET JobSet", JOBSETS, job.name, ns, missing_ok=True)
        if left is not None and not ownership.is_ours(left, owner, spec.campaign, spec.run_id):
            raise ownership.not_ours("JobSet", job.name, ns, left, spec.campaign)
        left_cm = c.call("GET ConfigMap", core.read_namespaced_config_map, cm, ns, missing_ok=True)
        if left_cm is not None and not ownership.is_ours(c.to_dict(left_cm), owner, spec.campaign, spec.run_id):
            raise ownership.not_ours("ConfigMap", cm, ns, c.to_dict(left_cm), spec.campaign)
        if left is not None:
            self._delete_run(ns, job.name, ownership.uid_of(left), owner, spec.campaign, wait_s=120)
        if left_cm is not None:
            self._delete_configmap(ns, cm, owner, spec.campaign, spec.run_id, ownership.uid_of(c.to_dict(left_cm)))
        # the run's checkpoint sub-path, made afresh with the run's owner mark (a resumed run would
        # otherwise resume from the interrupted attempt's checkpoints); refused when not the campaign's
        cleanup.prepare_run_dir(c, self.cfg, self.image, pvc=job.checkpoint_pvc, local=self.local,
                                checkpoint_root=self.checkpoint_root, path=job.checkpoint_path,
                                campaign=campaign_dir(spec.campaign, owner), run_id=spec.run_id, owner=owner,
                                mark=spec.owner_mark)
        made_cm = c.to_dict(c.call("CREATE ConfigMap", core.create_namespaced_config_map, ns, job.configmap))
        from kubernetes.client.rest import ApiException
        co = c.custom()
        stamp: dict = {}

        def create():
            self._count("CREATE JobSet")   # made here, not through call(): the stamps bracket the request alone
            stamp["before"] = time.time()
            out = co.create_namespaced_custom_object(*JOBSETS[:2], ns, JOBSETS.plural, job.jobset,
                                                     _request_timeout=c.timeout)
            stamp["after"] = time.time()
            return out
        try:
            created = retry_webhook(create, 30)
        except ApiException as exc:
            c.call("DELETE ConfigMap", core.delete_namespaced_config_map, cm, ns, missing_ok=True, conflict_ok=True,
                   body=ownership.delete_options(ownership.uid_of(made_cm)))
            raise SubmitError(f"the API server refused the JobSet: HTTP {exc.status}: {api_message(exc)}",
                              tip="check the rendered jobset.yaml (`poc render --platform k8s`); "
                                  "a webhook error means the JobSet or Kueue controller is down") from None
        except Exception as exc:
            if not is_connection_error(exc):
                raise
            raise SubmitError(f"the JobSet could not be sent: the API server is unreachable ({type(exc).__name__})",
                              tip="is the cluster up? `poc cluster status --k8s`") from None
        self._runs[spec.run_id] = _RunState()
        data = {"namespace": ns, "name": job.name, "uid": created["metadata"]["uid"], "configmap": cm,
                "configmap_uid": ownership.uid_of(made_cm), "campaign": spec.campaign, "owner": owner,
                "owner_mark": spec.owner_mark, "cluster": self.cluster_identity(),
                "nodes": spec.nodes, "checkpoint_path": job.checkpoint_path, "checkpoint_pvc": job.checkpoint_pvc,
                "submit_returned": stamp["after"], "lost_nodes": [], "cordoned": []}
        if self.power is not None:
            data["ledger"] = str(Path(self.checkpoint_root) / LEDGER)
        return Handle("k8s", spec.run_id, [f"{ns}/{job.name}"], stamp["before"], data=data)

    def cluster_identity(self) -> dict | None:
        if self._identity is None:
            self._identity = identity.k8s_identity(self.client.api.configuration, self.client.context)
        return self._identity

    # ------------------------------------------------------------------ observe
    def observe(self, handles: list[Handle]) -> dict[str, Observation]:
        try:
            js, wl, pods = self.looks.look([(h.data["namespace"], h.data["name"]) for h in handles])
            self._failed_polls = 0
        except BackendError as exc:   # a restarting API server: a few failed polls in a row are tolerated
            self._failed_polls += 1
            if self._failed_polls > self.query_budget:
                raise
            return {h.run_id: Observation(JobState.UNKNOWN, times=dict(self._run(h).times), native_state="Unknown",
                                          reason=exc.message) for h in handles}
        out = {}
        for h in handles:
            key = (h.data["namespace"], h.data["name"])
            rs = self._run(h)
            j, w, ps = js.get(key), wl.get(key), pods.get(key, [])
            if j is not None and j["metadata"].get("uid") != h.data.get("uid"):
                j = None  # a different JobSet of the same name
            rs.raw.note(j, w, ps)
            want = st.awaiting_allocation(rs.attempts, h.data["nodes"], ps)
            sched = self._scheduled_events(h.data["namespace"]) if want else []
            st.update_times(rs.times, rs.attempts, h.data["nodes"], j, w, ps, st.scheduled_event_times(sched, want))
            v = st.native_state(h.data["nodes"], j, w, ps)
            alloc = self._allocatable() if v.unscheduled is not None else None
            v = st.with_capacity(v, alloc)
            if self.trace is not None:
                self.trace(h.run_id, {"jobset": j, "workload": w, "pods": ps, "scheduled_events": sched,
                                      "allocatable": alloc, "native": v.native, "reason": v.reason})
            if self.power is not None and h.data.get("lost_nodes"):
                faults.remediate(self.client, h, ps)
            out[h.run_id] = Observation(v.state, events=self._read_logs(h, rs, ps), times=dict(rs.times),
                                        attempts=[dict(a, attempt=k) for k, a in sorted(rs.attempts.items())],
                                        native_state=v.native, reason=v.reason)
        return out

    def _run(self, h: Handle) -> _RunState:
        return self._runs.setdefault(h.run_id, _RunState())

    def _scheduled_events(self, ns: str) -> list[dict]:
        """The kube-scheduler's Scheduled events of the namespace (one list; [] when unreadable)."""
        c = self.client
        try:
            evs = c.call("LIST events", c.core().list_namespaced_event, ns, field_selector="reason=Scheduled").items
        except BackendError:
            return []
        return [c.to_dict(e) for e in evs]

    def _allocatable(self) -> list[dict] | None:
        """Each node's allocatable; None when the identity may not list nodes (a shared cluster).
        Listed at most every ALLOCATABLE_TTL_S: it is asked on every poll while a pod waits for a node."""
        now = time.monotonic()
        if self._alloc is not None and now - self._alloc[0] < ALLOCATABLE_TTL_S:
            return self._alloc[1]
        c = self.client
        try:
            alloc = [st.get(c.to_dict(n), "status", "allocatable", default={})
                     for n in c.call("LIST nodes", c.core().list_node).items]
        except BackendError:
            alloc = None
        self._alloc = (now, alloc)
        return alloc

    def _read_logs(self, h: Handle, rs: _RunState, ps: list[dict]) -> list[dict]:
        """New events from the run's pods: a running pod's log is followed by a thread (each line
        arrives as written); an ended pod's log is read once more in full, then no more."""
        ns, new = h.data["namespace"], []
        present = {p["metadata"]["name"] for p in ps}
        for name in sorted(rs.followed - present):          # pods gone (deleted, recreated under new names)
            new += rs.unseen(self.followers.stop(ns, name))
            rs.followed.discard(name)
        for p in ps:
            name, phase = p["metadata"]["name"], st.phase(p)
            if phase not in LOG_PHASES or name in rs.final_read:
                continue
            log = rs.logs.setdefault(name, PodLog())
            if phase == "Running" and self.follow_logs:
                f = self.followers.follow(ns, name, log)
                rs.followed.add(name)
                new += rs.unseen(f.take())
                if f.error:
                    rs.log_errors[name] = f.error
                continue
            if name in rs.followed:
                new += rs.unseen(self.followers.stop(ns, name))
                rs.followed.discard(name)
            new += rs.unseen(self._read_log(ns, name, log, rs))
            if phase != "Running":
                rs.final_read.add(name)
        return new

    def _read_log(self, ns: str, name: str, log: PodLog, rs: _RunState) -> list[dict]:
        """One plain read of a pod's log from a little before the last line taken."""
        from kubernetes.client.rest import ApiException
        kw = {"container": rj.CONTAINER, "timestamps": True}
        if (since := log.since_seconds(time.time())) is not None:
            kw["since_seconds"] = since
        try:
            self._count("READ pod log")
            text = self.client.core().read_namespaced_pod_log(name, ns, _request_timeout=5, **kw)
        except (ApiException, OSError) as exc:  # a pod going away, a dead kubelet: next poll
            rs.log_errors[name] = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
            rs.final_read.discard(name)
            return []
        except Exception as exc:
            if not is_connection_error(exc):
                raise
            rs.log_errors[name] = type(exc).__name__
            return []
        with self.followers.lock:
            events = log.feed(text if isinstance(text, str) else str(text))
        if log.notes:
            rs.log_errors[name] = log.notes[-1]
        return events

    def close(self) -> None:
        """Stop the watches and close the API client (the campaign is done with this platform)."""
        self.looks.stop()
        self.followers.stop_all()
        self.client.close()

    # ------------------------------------------------------------------ what a user reads, the platform's records
    def user_view(self, handle: Handle) -> list[dict]:
        from .userview import view
        return view(self, handle)

    def audit_evidence(self, handle: Handle) -> dict:
        from .auditlog import gather
        return gather(self, handle)

    def call_counts(self) -> dict[str, int]:
        return dict(getattr(self.client, "calls", None) or {})

    # ------------------------------------------------------------------ faults
    def inject(self, handle: Handle, kind: str, target_event: dict, journal: Journal = no_journal) -> FaultRecord:
        require_destructive_allowed(kind, self.allow_destructive_faults, "k8s")
        return faults.inject(self.client, handle, kind, target_event, journal, power=self.power)

    def restore_lost_nodes(self) -> list[str]:
        """Bring back nodes that a crashed campaign's lose_node fault left powered off (local cluster)."""
        if self.power is None:
            return []
        return faults.restore_ledger(self.client, self.power, Path(self.checkpoint_root) / LEDGER)

    # ------------------------------------------------------------------ collect / cancel
    def collect(self, handle: Handle) -> Collected:
        rs = self._run(handle)
        try:
            obs = self.observe([handle])[handle.run_id]
            state, native, reason = obs.state, obs.native_state, obs.reason
        except BackendError as exc:
            state, native, reason = JobState.UNKNOWN, "Unknown", exc.message
        events = list(self._volume_events(handle))
        for log in rs.logs.values():   # what the logs showed (the volume may lack a killed process's last line)
            events.extend(evmod.parse_lines(log.text.splitlines()))
        logs = {f"{n}.log": log.text for n, log in rs.logs.items()}
        info = {"jobset": handle.data["name"], "namespace": handle.data["namespace"], "final_state": native,
                "reason": reason, "restarts": max(rs.attempts, default=0),
                "node_remediation": handle.data.get("remediated") or {},
                "log_errors": dict(rs.log_errors), "polls": dict(self.looks.stats),
                "events_from": "pod logs" + (" + checkpoint volume" if self._on_volume(handle) else "")}
        logs["status.txt"] = (f"JobSet {handle.data['namespace']}/{handle.data['name']}: {native} ({state.value})"
                              + (f"\nreason: {reason}" if reason else "") + "\n")
        attempts = [dict(v, attempt=k) for k, v in sorted(rs.attempts.items())]
        try:   # the scheduler's records behind every time-stamp (harness.evidence.k8s derives them)
            raw = evidence_raw.gather(self.client, handle, rs.raw, self.looks.gone_pods(handle.data["namespace"]))
        except Exception as exc:  # noqa: BLE001 - collect returns what it has; the record says what is missing
            raw = {"errors": [f"gathering raw evidence: {type(exc).__name__}: {str(exc)[:300]}"]}
        if (policy := preflight.failure_policy_of(raw.get("jobset"))) is not None:
            info["failure_policy"] = policy   # what restarts this run, from its own JobSet
        return Collected(events=evmod.dedupe(events), times=dict(rs.times), attempts=attempts, logs=logs, info=info,
                         raw=raw)

    def _on_volume(self, h: Handle) -> bool:
        return self.local and not h.data.get("checkpoint_pvc") and bool(h.data.get("checkpoint_path"))

    def _volume_events(self, h: Handle) -> list[dict]:
        """The workload's own event files on the checkpoint volume (hostPath on this host only)."""
        if not self._on_volume(h):
            return []
        return [e for f in sorted((Path(h.data["checkpoint_path"]) / "events").glob("*.jsonl"))
                for e in evmod.parse_lines(f.read_text(errors="replace").splitlines())]

    def _delete_run(self, ns: str, name: str, uid: str | None, owner: str, campaign: str,
                    wait_s: float = 90) -> None:
        """Delete the run's JobSet (that object: its uid, from an object that passed the owner check, is a
        precondition) and wait until it and its pods are gone. A JobSet of the same name with another uid
        is someone else's: left alone."""
        c = self.client
        gone = c.call("DELETE JobSet", c.custom().delete_namespaced_custom_object, *JOBSETS[:2], ns,
                      JOBSETS.plural, name, body=ownership.delete_options(uid, "Foreground"), missing_ok=True,
                      conflict_ok=True)
        if gone is CONFLICT:
            return
        # wait until it and its pods are gone, so the next run's queue time does not include this teardown
        sel = ownership.selector(owner, campaign, **{rj.JOBSET_NAME_LABEL: name})
        deadline = time.time() + wait_s
        while time.time() < deadline:
            js = c.get("GET JobSet", JOBSETS, name, ns, missing_ok=True)
            pods = c.call("LIST pods", c.core().list_namespaced_pod, ns, label_selector=sel).items
            if (js is None or (uid and ownership.uid_of(js) != uid)) and not pods:
                return
            time.sleep(1)

    def _delete_configmap(self, ns: str, name: str, owner: str, campaign: str, run_id: str,
                          uid: str | None = None) -> str:
        """The run's workload ConfigMap, only while it is this campaign's (its poc/owner label) and, when
        a uid is known (the journal's), that very object; the delete carries its uid."""
        core = self.client.core()
        return ownership.delete_if_ours(self.client, "ConfigMap", core.read_namespaced_config_map,
                                        core.delete_namespaced_config_map, name, ns, owner=owner, campaign=campaign,
                                        run_id=run_id, uid=uid)

    def cleanup(self, handle: Handle, ok: bool, keep: str) -> dict:
        """The run's checkpoint sub-path, once collected, unless keep_run_files keeps it (cleanup.py)."""
        d = handle.data
        pvc, path = d.get("checkpoint_pvc"), d.get("checkpoint_path") or ""
        owner = ownership.check_owner(d.get("owner") or "")
        campaign = campaign_dir(d.get("campaign") or "", owner)   # the directory's name
        where = f"pvc {pvc}:{path}" if pvc else path
        if (why := keep_reason(ok, keep)) is not None:
            return {"removed": [], "kept": [where], "reason": why}
        if pvc:
            return cleanup.run_cleanup_pod(self.client, self.cfg, self.image, pvc, campaign, handle.run_id,
                                           owner=owner, mark=owner_mark_of(d))
        if self._on_volume(handle):
            return cleanup.remove_host_path(self.checkpoint_root, path, campaign, handle.run_id, owner_mark_of(d))
        return {"removed": [], "kept": [where],
                "reason": "a hostPath on the cluster's nodes is not reachable from here; remove it on each node"}

    def _delete_serving(self, sv: dict | None, owner: str, campaign: str, run_id: str) -> list[str]:
        """The serving scenario's objects named on the training run's handle (harness/serve/k8s.py), each
        only while it is this campaign's run's (poc/owner and poc/run-id) and, where the handle recorded
        one, that very object (its uid); what was left and why."""
        if not sv:
            return []
        return ownership.delete_serving_objects(self.client, sv, owner=owner, campaign=campaign, run_id=run_id)[1]

    def cancel(self, handle: Handle) -> None:
        # a record is a file on disk: one naming no cluster, another cluster, another ledger or a path
        # outside the checkpoint root is refused before anything is touched (records.py)
        records.check(handle, self.cluster_identity(), checkpoint_root=self.checkpoint_root,
                      ledger=str(Path(self.checkpoint_root) / LEDGER), on_volume=self._on_volume(handle))
        d = handle.data
        ns, name = d["namespace"], d["name"]
        owner, campaign = d.get("owner") or "", d.get("campaign") or ""
        refused = None
        js = self.client.get("GET JobSet", JOBSETS, name, ns, missing_ok=True) if name else None
        if d.get("intent") and not d.get("uid"):   # the uid never reached the journal
            d["uid"] = ownership.own_uid(js, owner, campaign, handle.run_id)
            if d["uid"] is None:
                name = ""   # none there, or someone else's of that name: no JobSet to delete
        elif js is None or (d.get("uid") and ownership.uid_of(js) != d["uid"]):
            name = ""       # gone, or the name is someone else's object now: nothing of the run's to delete
        elif not ownership.is_ours(js, owner, campaign, handle.run_id):
            # the journal's own JobSet without the campaign's owner label (an older harness made it): a
            # campaign with an owner id never deletes such an object; the record stays, and the tip says how
            refused, name = ownership.not_ours("JobSet", name, ns, js, campaign, cls=BackendError), ""
        try:
            faults.restore(self.client, handle, power=self.power)
        finally:
            if name:
                self._delete_run(ns, name, d.get("uid"), owner, campaign)
            self._delete_configmap(ns, d["configmap"], owner, campaign, handle.run_id, d.get("configmap_uid"))
            self._delete_serving(d.get("serving"), owner, campaign, handle.run_id)
            if self._on_volume(handle):
                # the checkpoints are spent; the event files beside them stay for collect(). Only inside the
                # run's own directory (checked above) and only while its owner mark is the run's
                run_dir = Path(d["checkpoint_path"])
                if cleanup.mark_is(run_dir, owner_mark_of(d)):
                    shutil.rmtree(run_dir / "ckpt", ignore_errors=True)
        if refused is not None:
            raise refused


def owner_mark_of(data: dict) -> str:
    """The run directory's owner mark a handle names: "owner_mark", or in a record of an older harness its
    owner id (marks were the owner then)."""
    return data.get("owner_mark") or data.get("owner") or ""
