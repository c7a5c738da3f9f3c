"""A journalled handle is cancelled only on the cluster it was made on: the identity each backend
records (Slurm: ClusterName and controllers from `scontrol show config`; Kubernetes: API server URL
and CA fingerprint), and `poc cleanup` / --resume refusing a handle replayed against another cluster."""
from __future__ import annotations

import base64
import hashlib
from types import SimpleNamespace

import pytest
from support.fakes import ScriptedBackend, SimClock
from support.paths import FIXTURES

from harness import slurm_parse as sp
from harness.backends import identity
from harness.backends.base import Handle
from harness.config import from_mapping
from harness.errors import BackendError
from harness.pipeline import campaign
from harness.store import Store
from harness.undo import undo_inflight

FIX = FIXTURES / "slurm"
HERE = {"platform": "slurm", "cluster_name": "here"}


def test_slurm_identity_from_the_recorded_scontrol_show_config():
    conf = sp.show_config((FIX / "trixie" / "scontrol_show_config.txt").read_text())
    assert identity.slurm_identity(conf) == {"platform": "slurm", "cluster_name": "poc", "controllers": ["slurmctld"]}
    # slurmrestd's ping alone names the cluster, not its controllers
    assert identity.slurm_identity({"ClusterName": "poc"})["controllers"] is None


def test_k8s_identity_fingerprints_the_ca_from_a_file_or_from_inline_data(tmp_path):
    pem = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    (tmp_path / "ca.crt").write_bytes(pem)
    got = identity.k8s_identity(SimpleNamespace(host="https://10.0.0.1:6443", ssl_ca_cert=str(tmp_path / "ca.crt")),
                                "admin@poc")
    assert got == {"platform": "k8s", "server": "https://10.0.0.1:6443", "ca_sha256": hashlib.sha256(pem).hexdigest(),
                   "context": "admin@poc"}
    inline = identity.k8s_identity(SimpleNamespace(host="https://10.0.0.1:6443", ssl_ca_cert=None,
                                                   ca_cert_data=base64.b64encode(pem).decode()), None)
    assert inline["ca_sha256"] == got["ca_sha256"]


@pytest.mark.parametrize(("then", "now", "diff"), [
    ({"platform": "slurm", "cluster_name": "poc", "controllers": ["ctl"]},
     {"platform": "slurm", "cluster_name": "poc", "controllers": ["ctl"]}, []),
    ({"platform": "slurm", "cluster_name": "poc", "controllers": ["ctl"]},
     {"platform": "slurm", "cluster_name": "staging", "controllers": ["ctl2"]},
     ["cluster_name poc then, staging now", "controllers ctl then, ctl2 now"]),
    # a field one side does not know (slurmrestd alone) is not compared
    ({"platform": "slurm", "cluster_name": "poc", "controllers": ["ctl"]},
     {"platform": "slurm", "cluster_name": "poc", "controllers": None}, []),
    ({"platform": "k8s", "server": "https://a:6443", "ca_sha256": "a" * 64, "context": "x"},
     {"platform": "k8s", "server": "https://a:6443", "ca_sha256": "b" * 64, "context": "x"},
     ["ca_sha256 aaaaaaaaaaaa then, bbbbbbbbbbbb now"]),
    # one cluster through another context: the same cluster
    ({"platform": "k8s", "server": "https://a:6443", "ca_sha256": "a" * 64, "context": "x"},
     {"platform": "k8s", "server": "https://a:6443", "ca_sha256": "a" * 64, "context": "y"}, []),
    (None, {"platform": "k8s", "server": "https://a:6443"}, []),      # a handle from before identities
])
def test_differences(then, now, diff):
    assert identity.differences(then, now) == diff


def handle_on(cluster: dict | None, run_id: str = "local-clean-01") -> dict:
    return Handle("local", run_id, ["1"], 0.0, data={"cluster": cluster} if cluster else {}).to_json()


def test_a_handle_from_another_cluster_is_refused_with_error_and_tip():
    with pytest.raises(BackendError) as e:
        identity.refuse_other_cluster(handle_on({"platform": "slurm", "cluster_name": "prod"}), HERE)
    assert e.value.message.startswith("run local-clean-01's in-flight record was made on another local cluster")
    assert "cluster_name prod then, here now" in e.value.message and "--config" in e.value.tip
    identity.refuse_other_cluster(handle_on(HERE), HERE)
    identity.refuse_other_cluster(handle_on(None), HERE)


class OnCluster(ScriptedBackend):
    def __init__(self, ident: dict, **kw):
        super().__init__(**kw)
        self.ident = ident

    def cluster_identity(self):
        return self.ident


def _journalled(tmp_path, cfg, cluster: dict) -> Store:
    store = Store(tmp_path, cfg.campaign)
    store.open(cfg.config_hash(), cfg.redacted(), resume=False)
    store.mark_inflight(handle_on(cluster))
    store.close()
    return store


def test_cleanup_leaves_a_handle_of_another_cluster_and_cancels_one_of_this_cluster(tmp_path):
    cfg = from_mapping({"platforms": ["local"], "repetitions": 1, "faults": []})
    store = _journalled(tmp_path, cfg, {"platform": "slurm", "cluster_name": "prod"})
    other = OnCluster(HERE)
    done, failed = undo_inflight(store, lambda p: other)
    assert done == [] and other.cancelled == [] and "another local cluster" in failed[0]["error"]
    assert [h["run_id"] for h in store.inflight()] == ["local-clean-01"], "kept for the right cluster"
    same = OnCluster({"platform": "slurm", "cluster_name": "prod"})
    done, failed = undo_inflight(store, lambda p: same)
    assert failed == [] and same.cancelled == ["local-clean-01"] and store.inflight() == []


def test_resume_against_another_cluster_stops_that_platform_and_keeps_the_record(tmp_path):
    cfg = from_mapping({"platforms": ["local"], "repetitions": 1, "faults": [], "workload": {"steps": 2}})
    _journalled(tmp_path, cfg, {"platform": "slurm", "cluster_name": "prod"})
    clock = SimClock()
    backend = OnCluster(HERE, clock=clock)
    (pre,) = campaign(cfg, ["local"], Store(tmp_path, cfg.campaign), lambda p: backend, resume=True, poll_s=0.01,
                      clock=clock, sleep=clock.sleep)
    assert pre["scenario"] == "preflight" and "another local cluster" in pre["error"]["message"]
    assert backend.cancelled == []
    assert len(Store(tmp_path, cfg.campaign).inflight()) == 1
