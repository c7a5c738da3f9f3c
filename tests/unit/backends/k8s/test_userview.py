"""What a Kubernetes user reads about a mistaken run, from objects recorded on the native cluster.

tests/fixtures/k8s/mistakes/record.py made the fixtures: each of the five mistakes submitted through
the backend, looked at once a second, then cancelled. Each file keeps two looks at the run's
objects (at the first message naming the problem, and the last look): messages() must find the
platform's own words in them, from the place a user reads them. Also here: the API calls a look
costs (one in the steady state; a failed container's log once), the client's call counter, and
the launch line's entrypoint.
"""
from __future__ import annotations

import collections
import dataclasses
import json
import threading
from types import SimpleNamespace

import pytest
from support.paths import FIXTURES

from harness import config, spec
from harness.backends.base import Handle
from harness.backends.k8s import userview as uv
from harness.backends.k8s.api import K8sClient
from harness.backends.k8s.logfollow import Followers
from harness.backends.k8s.logs import PodLog
from harness.errors import BackendError, ConfigError
from harness.render import jobset as rj

FIX = FIXTURES / "k8s" / "mistakes"
KINDS = ("impossible_resources", "missing_image", "wrong_queue", "entrypoint_typo", "missing_checkpoint_volume")


def recorded(kind: str) -> dict:
    return json.loads((FIX / f"{kind}.json").read_text())


def seen(kind: str, snap: str = "final") -> list[dict]:
    s = recorded(kind)["snapshots"][snap]
    logs = {pod: uv.log_excerpt(text) for pod, text in s.get("logs_read", {}).items()}
    return uv.messages(s["jobset"], s["workload"], s["pods"], s["events"], logs)


def texts(msgs: list[dict], source: str) -> list[str]:
    return [m["text"] for m in msgs if m["source"] == source]


@pytest.mark.parametrize("kind", KINDS)
def test_the_first_clear_look_names_the_problem_again(kind):
    """The recorded first clear message comes back from the same look's objects, same source."""
    d = recorded(kind)
    first = d["first_clear"]
    assert first is not None, f"{kind}: the recording saw no clear message"
    msgs = seen(kind, "first_clear")
    assert {"source": first["source"], "text": first["text"]} in msgs


def test_impossible_resources_kueue_says_which_resource_and_how_much():
    quota = texts(seen("impossible_resources"), "Kueue Workload condition QuotaReserved")
    assert len(quota) == 1
    assert quota[0].startswith("couldn't assign flavors to pod set w: insufficient quota for nvidia.com/gpu")
    assert "> maximum capacity" in quota[0]
    # Kueue's Pending event (a Warning) says the same; no pod was ever made
    assert texts(seen("impossible_resources"), "workload event Pending") == quota
    assert not recorded("impossible_resources")["snapshots"]["final"]["pods"]


def test_wrong_queue_kueue_names_the_queue():
    assert texts(seen("wrong_queue"), "Kueue Workload condition QuotaReserved") == [
        "LocalQueue poc-queue-typo doesn't exist"]


def test_missing_image_the_kubelet_names_the_tag():
    msgs = seen("missing_image")
    waiting = texts(msgs, "container waiting reason")
    assert waiting and all(t.split(":")[0] in ("ErrImagePull", "ImagePullBackOff") for t in waiting)
    assert all(":does-not-exist" in t for t in waiting)
    failed = texts(msgs, "pod event Failed")
    assert any(t.startswith('Failed to pull image "') and "does-not-exist" in t for t in failed)


def test_missing_volume_the_scheduler_names_the_claim():
    msgs = seen("missing_checkpoint_volume")
    claim = 'persistentvolumeclaim "poc-checkpoints-missing" not found'
    cond = texts(msgs, "pod condition PodScheduled")
    assert cond and all(t.startswith("Unschedulable: ") and claim in t for t in cond)
    assert any(claim in t for t in texts(msgs, "pod event FailedScheduling"))


def test_entrypoint_typo_the_log_has_pythons_words_and_torchruns_summary():
    logs = texts(seen("entrypoint_typo", "first_clear"), "pod log")
    assert logs == ["/usr/bin/python3: can't open file '/opt/poc/ddp_trian.py': [Errno 2] No such file or directory\n"
                    "/opt/poc/ddp_trian.py FAILED"]     # both ranks said the same: shown once


def test_entrypoint_typo_ends_in_jobsets_own_failure():
    msgs = seen("entrypoint_typo")
    assert any("reaching max number of restarts" in t for t in texts(msgs, "JobSet condition Failed"))


@pytest.mark.parametrize("kind", KINDS)
def test_each_message_once_and_only_warnings_among_events(kind):
    s = recorded(kind)["snapshots"]["final"]
    msgs = seen(kind)
    assert len({(m["source"], m["text"]) for m in msgs}) == len(msgs)
    normal = {e["message"] for e in s["events"] if e.get("type") == "Normal"}
    warning = {e["message"] for e in s["events"] if e.get("type") == "Warning"}
    shown = {m["text"] for m in msgs if " event " in m["source"]}
    assert shown == warning and not (normal - warning) & shown


def test_log_excerpt_without_torchruns_report_is_the_last_lines():
    text = "\n".join(f"line {i}" for i in range(50)) + "\n\n"
    assert uv.log_excerpt(text).splitlines() == [f"line {i}" for i in range(30, 50)]
    assert uv.log_excerpt("") == ""


def test_log_excerpt_keeps_a_tracebacks_tail_before_torchruns_line():
    full = recorded("entrypoint_typo")["snapshots"]["final"]["logs_read"]
    text = next(iter(full.values()))
    workload = "\n".join(["step 1 loss 0.5", "Traceback (most recent call last):", '  File "x.py", line 3',
                          "RuntimeError: boom"])
    cut = text.index("/usr/bin/python3: can't open file")
    rest = text[text.index("\n", cut) + 1:]
    out = uv.log_excerpt(workload + "\n" + rest).splitlines()
    assert out[:4] == workload.splitlines() and out[-1] == "/opt/poc/ddp_trian.py FAILED"


# ---------------------------------------------------------------- one look's API calls, with recorded objects
class _Calls:
    """A K8sClient stand-in answering with recorded objects; counts calls as K8sClient does."""

    def __init__(self, snap: dict, fail_events: bool = False):
        self.calls: collections.Counter = collections.Counter()
        self.snap, self.fail_events = snap, fail_events

    def call(self, what, fn, *a, **kw):
        self.calls[what] += 1
        return fn(*a, **kw)

    def core(self):
        def events(ns):
            if self.fail_events:
                raise BackendError("LIST events: HTTP 403 Forbidden")
            return SimpleNamespace(items=self.snap["events"])
        return SimpleNamespace(list_namespaced_event=events,
                               read_namespaced_pod_log=lambda name, ns, **kw: self.snap["logs_read"][name])

    @staticmethod
    def to_dict(o):
        return o


class _Looks:
    def __init__(self, key, snap):
        self.key, self.snap = key, snap

    def look(self, keys):
        assert keys == [self.key]
        return ({self.key: self.snap["jobset"]}, {self.key: self.snap["workload"]}, {self.key: self.snap["pods"]})


class _Backend:
    """What view() uses of KubernetesBackend (an ordinary object: weakly referable, as the backend is)."""

    def __init__(self, client, looks):
        self.client, self.looks = client, looks


def _backend(kind: str, **kw):
    d = recorded(kind)
    snap = d["snapshots"]["final"]
    key = (d["namespace"], d["name"])
    backend = _Backend(_Calls(snap, **kw), _Looks(key, snap))
    handle = Handle("k8s", d["name"], [f"{key[0]}/{key[1]}"], 0.0,
                    data={"namespace": key[0], "name": key[1], "uid": snap["jobset"]["metadata"]["uid"]})
    return backend, handle


def test_a_look_is_one_call_and_a_failed_containers_log_is_read_once():
    backend, handle = _backend("entrypoint_typo")
    failed = len(uv.failed_containers(recorded("entrypoint_typo")["snapshots"]["final"]["pods"]))
    assert failed == 2
    first = uv.view(backend, handle)
    assert dict(backend.client.calls) == {"LIST events": 1, "READ pod log": failed}
    for _ in range(3):
        assert uv.view(backend, handle) == first
    assert dict(backend.client.calls) == {"LIST events": 4, "READ pod log": failed}
    assert any("can't open file '/opt/poc/ddp_trian.py'" in m["text"] for m in first if m["source"] == "pod log")


def test_unreadable_events_leave_the_objects_own_words():
    backend, handle = _backend("missing_checkpoint_volume", fail_events=True)
    msgs = uv.view(backend, handle)
    assert not [m for m in msgs if " event " in m["source"]]
    assert any('"poc-checkpoints-missing" not found' in m["text"] for m in msgs)


def test_a_jobset_of_another_uid_is_not_this_run():
    backend, handle = _backend("wrong_queue")
    handle.data["uid"] = "another-run"
    assert not [m for m in uv.view(backend, handle) if m["source"].startswith("JobSet")]


# ---------------------------------------------------------------- the client's call counter
def test_the_client_counts_each_call_by_kind_failed_ones_too():
    from kubernetes.client.rest import ApiException

    c = K8sClient("/nonexistent", api_client=SimpleNamespace(configuration=SimpleNamespace(host="h")))

    def missing(*_a, **_k):
        raise ApiException(status=404, reason="Not Found")
    c.call("GET JobSet", lambda **_k: {"ok": 1})
    c.call("GET JobSet", missing, missing_ok=True)
    with pytest.raises(BackendError):
        c.call("DELETE ConfigMap", missing)
    c.count("WATCH pods")
    assert dict(c.calls) == {"GET JobSet": 2, "DELETE ConfigMap": 1, "WATCH pods": 1}


def test_each_log_stream_opened_is_counted():
    opened = threading.Event()
    counted: list[str] = []

    class Core:
        api_client = SimpleNamespace(close=lambda: None)

        def read_namespaced_pod_log(self, *_a, **_k):
            opened.set()
            raise ConnectionError("gone")   # the follower notes it and re-opens

    f = Followers(Core, rj.CONTAINER, count=counted.append)
    f.follow("ns", "pod-0", PodLog())
    assert opened.wait(10)
    f.stop_all()
    assert counted and set(counted) == {"FOLLOW pod log"}


# ---------------------------------------------------------------- the launch line runs spec.entrypoint
def _spec(**kw):
    return dataclasses.replace(spec.build(config.from_mapping({"platforms": ["k8s"]}), "k8s", "k8s-clean-01", None),
                               **kw)


def test_the_launch_line_names_the_entrypoint_and_the_configmap_ships_the_workload():
    k = config.from_mapping({"platforms": ["k8s"]}).kubernetes
    default = rj.render_jobset(_spec(), k, "img:1", "/ckpt")
    typo = rj.render_jobset(_spec(entrypoint="ddp_trian.py"), k, "img:1", "/ckpt")
    cmd = typo.jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert f"{rj.WORKLOAD_DIR}/ddp_trian.py" in cmd and f"{rj.WORKLOAD_DIR}/{spec.WORKLOAD_SCRIPT}" not in cmd
    assert f"{rj.WORKLOAD_DIR}/{spec.WORKLOAD_SCRIPT}" in rj.container_command(_spec())
    shipped = [spec.WORKLOAD_SCRIPT, *rj.WORKLOAD_SIBLINGS]      # the workload and the modules beside it
    assert list(typo.configmap["data"]) == list(default.configmap["data"]) == shipped
    absolute = rj.container_command(_spec(entrypoint="/abs/x.py"))
    assert "/abs/x.py" in absolute and not any(a.endswith("//abs/x.py") for a in absolute)


def test_an_empty_entrypoint_is_refused():
    k = config.from_mapping({"platforms": ["k8s"]}).kubernetes
    with pytest.raises(ConfigError, match="entrypoint is empty"):
        rj.render_jobset(_spec(entrypoint=" "), k, "img:1", "/ckpt")
