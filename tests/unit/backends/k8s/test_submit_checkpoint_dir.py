"""Submit makes the run's checkpoint sub-path afresh before the JobSet exists (backends/k8s/cleanup.py
prepare_run_dir): `poc run --resume` re-runs an interrupted run with the same token and run id, hence the
same sub-path, and must not resume from the interrupted attempt's checkpoints. The owned-directory rule
(render/owned_dir.py) decides, as at cleanup: a directory with another campaign's mark, or none, is
left alone and the submit refused.

On a PVC the cleanup pod does it: the fake API server below runs the pod's own command with a real sh
on a directory standing in for the claim, and answers with the pod phases and exit code the API server
reports (the shape test_cleanup.py uses). On this machine's hostPath the harness runs that command itself.
tests/integration/test_k8s_checkpoint_pvc.py does both against the native cluster with a real claim."""
from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from kubernetes.client.rest import ApiException

from harness import config
from harness.backends.k8s.api import CONFLICT
from harness.backends.k8s.backend import KubernetesBackend
from harness.errors import SubmitError
from harness.render import jobset as rj
from harness.render.owned_dir import OWNER_MARK
from harness.spec import build, campaign_dir

TOKEN, THEIRS = "a1b2c3", "d4e5f6"
RUN = "k8s-clean-01"


class FakeApiServer:
    """JobSets, ConfigMaps and pods of one namespace; a created pod runs its command at once, with
    /poc-run (the claim's mount) mapped to `claim`; logs every change in order."""

    def __init__(self, claim: Path):
        self.claim, self.log, self.objects = claim, [], {}
        self.pod_exit: dict[str, int] = {}

    def _get(self, kind, name):
        if (kind, name) not in self.objects:
            raise ApiException(status=404, reason="Not Found")
        return self.objects[(kind, name)]

    def get_namespaced_custom_object(self, group, version, ns, plural, name, _request_timeout=None):
        return self._get("JobSet", name)

    def create_namespaced_custom_object(self, group, version, ns, plural, obj, _request_timeout=None):
        self.log.append(("CREATE", "JobSet", obj["metadata"]["name"]))
        self.objects[("JobSet", obj["metadata"]["name"])] = dict(obj, metadata={**obj["metadata"], "uid": "u-1"})
        return self.objects[("JobSet", obj["metadata"]["name"])]

    def read_namespaced_config_map(self, name, ns, _request_timeout=None):
        return self._get("ConfigMap", name)

    def create_namespaced_config_map(self, ns, body, _request_timeout=None):
        self.log.append(("CREATE", "ConfigMap", body["metadata"]["name"]))
        made = dict(body, metadata={**body["metadata"], "uid": "cm-1"})
        self.objects[("ConfigMap", body["metadata"]["name"])] = made
        return made

    def delete_namespaced_config_map(self, name, ns, body=None, _request_timeout=None):
        self.objects.pop(("ConfigMap", name), None)

    def create_namespaced_pod(self, ns, body, _request_timeout=None):
        name = body["metadata"]["name"]
        self.log.append(("CREATE", "Pod", name, body["spec"]["containers"][0]["command"]))
        argv = [a.replace(rj.CKPT_MOUNT, str(self.claim), 1) if a.startswith(rj.CKPT_MOUNT + "/") else a
                for a in body["spec"]["containers"][0]["command"]]
        self.pod_exit[name] = subprocess.run(argv, check=False).returncode
        self.objects[("Pod", name)] = made = dict(body, metadata={**body["metadata"], "uid": "pod-1"})
        return made

    def read_namespaced_pod(self, name, ns, _request_timeout=None):
        pod = self._get("Pod", name)
        code = self.pod_exit[name]
        return {"metadata": pod["metadata"], "status": {"phase": "Succeeded" if code == 0 else "Failed",
                "containerStatuses": [{"state": {"terminated": {"exitCode": code}}}]}}

    def read_namespaced_pod_log(self, name, ns, _request_timeout=None):
        return ""

    def delete_namespaced_pod(self, name, ns, body=None, _request_timeout=None):
        if ("Pod", name) in self.objects:
            self.log.append(("DELETE", "Pod", name))
            del self.objects[("Pod", name)]
        else:
            raise ApiException(status=404, reason="Not Found")

    def list_namespaced_pod(self, ns, label_selector=None, _request_timeout=None):
        return SimpleNamespace(items=[])


class FakeClient:
    timeout = 5
    own_core = None
    context = None
    api = SimpleNamespace(configuration=SimpleNamespace(host="https://127.0.0.1:6443", ssl_ca_cert=None))

    def __init__(self, server):
        self.server = server

    def core(self):
        return self.server

    custom = core

    def count(self, what, n=1):
        pass

    def to_dict(self, o):
        return o

    def get(self, what, res, name, ns=None, missing_ok=False):
        return self.call(what, self.server.get_namespaced_custom_object, res.group, res.version, ns, res.plural,
                         name, missing_ok=missing_ok)

    def call(self, what, fn, *args, missing_ok=False, conflict_ok=False, **kw):
        try:
            return fn(*args, _request_timeout=self.timeout, **kw)
        except ApiException as exc:
            if missing_ok and exc.status == 404:
                return None
            if conflict_ok and exc.status == 409:
                return CONFLICT
            raise


def leftover(root: Path, mark: str | None) -> Path:
    """An interrupted attempt's checkpoint sub-path: a checkpoint, an event file, and the mark its pods wrote."""
    d = root / campaign_dir("smoke", TOKEN) / RUN
    (d / "ckpt").mkdir(parents=True)
    (d / "ckpt" / "ckpt-20.pt").write_bytes(b"old")
    (d / "events").mkdir()
    (d / "events" / "rank0.jsonl").write_text('{"kind": "step"}\n')
    if mark is not None:
        (d / OWNER_MARK).write_text(mark)
    return d


def pvc_backend(tmp_path: Path):
    cfg = config.from_mapping({"campaign": "smoke", "platforms": ["k8s"],
                               "kubernetes": {"kubeconfig": "/x/kubeconfig", "image": "img:1",
                                              "checkpoint_pvc": "team-ckpt"}})
    server = FakeApiServer(tmp_path / "claim")
    be = KubernetesBackend(cfg.kubernetes, FakeClient(server), image="img:1", checkpoint_root="/nonexistent",
                           checkpoint_pvc="team-ckpt")
    be._count = lambda what: None
    return be, replace(build(cfg, "k8s", RUN, None), owner=TOKEN), server


def test_on_a_pvc_this_campaigns_leftover_is_made_afresh_before_anything_is_created(tmp_path):
    be, spec, server = pvc_backend(tmp_path)
    d = leftover(server.claim, TOKEN)
    be.submit(spec, be.render(spec))
    assert not (d / "ckpt").exists() and not (d / "events").exists()
    assert (d / OWNER_MARK).read_text() == TOKEN and sorted(p.name for p in d.iterdir()) == [OWNER_MARK]
    kinds = [x[:2] for x in server.log]
    assert kinds == [("CREATE", "Pod"), ("DELETE", "Pod"), ("CREATE", "ConfigMap"), ("CREATE", "JobSet")]
    assert server.log[0][3][:2] == ["sh", "-c"] and server.log[0][3][4:] == \
        ["prepare", f"{rj.CKPT_MOUNT}/smoke-{TOKEN}/{RUN}", TOKEN]


def test_on_a_pvc_a_first_submit_makes_the_directory_with_the_mark(tmp_path):
    be, spec, server = pvc_backend(tmp_path)
    be.submit(spec, be.render(spec))
    assert (server.claim / f"smoke-{TOKEN}" / RUN / OWNER_MARK).read_text() == TOKEN


@pytest.mark.parametrize("mark", [THEIRS, None])
def test_on_a_pvc_a_directory_that_is_not_the_campaigns_refuses_the_submit(tmp_path, mark):
    be, spec, server = pvc_backend(tmp_path)
    d = leftover(server.claim, mark)
    with pytest.raises(SubmitError) as e:
        be.submit(spec, be.render(spec))
    assert e.value.message == (f"the run's checkpoint directory pvc team-ckpt:smoke-{TOKEN}/{RUN} exists and is not "
                               f"this campaign's (its owner mark is not this run's, or it has none): the run "
                               "would resume from (and write into) someone "
                               "else's checkpoints")
    assert e.value.tip.startswith("nothing was removed or submitted") and "claim team-ckpt" in e.value.tip
    assert (d / "ckpt" / "ckpt-20.pt").read_bytes() == b"old"      # untouched
    assert [x[:2] for x in server.log] == [("CREATE", "Pod"), ("DELETE", "Pod")]   # no ConfigMap, no JobSet


def hostpath_backend(tmp_path: Path, local: bool = True):
    cfg = config.from_mapping({"campaign": "smoke", "platforms": ["k8s"], "kubernetes": {"image": "img:1"}})
    server = FakeApiServer(tmp_path / "unused")
    be = KubernetesBackend(cfg.kubernetes, FakeClient(server), image="img:1", checkpoint_root=str(tmp_path),
                           local_cluster=local)
    be._count = lambda what: None
    return be, replace(build(cfg, "k8s", RUN, None), owner=TOKEN), server


def test_on_this_machines_hostpath_the_same_rule_applies_without_a_pod(tmp_path):
    be, spec, server = hostpath_backend(tmp_path)
    d = leftover(tmp_path, TOKEN)
    be.submit(spec, be.render(spec))
    assert sorted(p.name for p in d.iterdir()) == [OWNER_MARK] and (d / OWNER_MARK).read_text() == TOKEN
    assert [x[:2] for x in server.log] == [("CREATE", "ConfigMap"), ("CREATE", "JobSet")]


def test_on_this_machines_hostpath_another_campaigns_directory_refuses_the_submit(tmp_path):
    be, spec, server = hostpath_backend(tmp_path)
    d = leftover(tmp_path, THEIRS)
    with pytest.raises(SubmitError, match=r"not this campaign's \(its owner mark is not this run's") as e:
        be.submit(spec, be.render(spec))
    assert f"rm -rf {d}" in e.value.tip
    assert (d / "ckpt" / "ckpt-20.pt").read_bytes() == b"old" and (d / OWNER_MARK).read_text() == THEIRS
    assert server.log == []


def test_a_hostpath_on_a_real_clusters_nodes_is_left_to_the_pods(tmp_path):
    """Not reachable from here: nothing is touched, and the submit goes on."""
    be, spec, server = hostpath_backend(tmp_path, local=False)
    d = leftover(tmp_path, THEIRS)
    be.submit(spec, be.render(spec))
    assert (d / "ckpt" / "ckpt-20.pt").exists()
    assert [x[:2] for x in server.log] == [("CREATE", "ConfigMap"), ("CREATE", "JobSet")]


def test_with_the_campaigns_key_the_directory_and_the_pods_hold_the_runs_keyed_mark(tmp_path):
    """A campaign with an owner key: prepare writes spec.owner_mark (a keyed digest of the directory's
    path, not the public owner id), the JobSet's pods are told the same mark, and the handle records it
    for the cleanup, which removes the directory only with it."""
    from harness.owner import OwnerKey
    key = OwnerKey.new()
    be, spec, server = pvc_backend(tmp_path)
    spec = replace(spec, owner=key.id, owner_key=key)
    assert spec.owner_mark not in (key.id, "")
    h = be.submit(spec, be.render(spec))
    d = server.claim / f"smoke-{key.id}" / RUN
    assert (d / OWNER_MARK).read_text() == spec.owner_mark
    prepare = server.log[0][3]
    assert prepare[4:] == ["prepare", f"{rj.CKPT_MOUNT}/smoke-{key.id}/{RUN}", spec.owner_mark]
    cmd = server.objects[("JobSet", RUN)]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "containers"][0]["command"]
    assert cmd[cmd.index("--owner") + 1] == spec.owner_mark and key.secret not in " ".join(cmd)
    assert h.data["owner_mark"] == spec.owner_mark and h.data["owner"] == key.id
    server.log.clear()
    assert be.cleanup(h, ok=True, keep="never")["removed"] and not d.exists()
    assert server.log[0][3][4:] == ["remove", f"{rj.CKPT_MOUNT}/smoke-{key.id}/{RUN}", spec.owner_mark]
