"""config/review.py: the security-relevant choices a shared config may make are said, at `poc validate`
and `poc run`, and kept in campaign.json beside the config; an ordinary config says nothing."""
from __future__ import annotations

import json

import pytest

from harness import config as cfgmod
from harness.cli import main
from harness.config import review
from harness.store import Store

CHOICES = [
    ({"slurm": {"extra_sbatch": ["--export=ALL,LD_PRELOAD=/tmp/x.so"]}}, "slurm.extra_sbatch: --export=ALL,LD_PRELOAD"),
    ({"slurm": {"extra_sbatch": ["--export=BASH_ENV=/tmp/rc,PATH=/tmp/bin"]}}, "sets BASH_ENV, PATH"),
    ({"slurm": {"extra_sbatch": ["--export=LD_LIBRARY_PATH=/x"]}}, "sets LD_LIBRARY_PATH"),
    ({"fabric": {"env": {"LD_PRELOAD": "/tmp/x.so"}}}, "fabric.env: sets LD_PRELOAD in every rank"),
    ({"slurm": {"transport": "rest", "rest": {"url": "https://r.example:6820",
                                               "job_environment": {"PATH": "/bin", "PYTHONPATH": "/tmp"}}}},
     "slurm.rest.job_environment: sets PYTHONPATH"),
    ({"kubernetes": {"pod": {"tolerations": [{"operator": "Exists"}]}}}, "operator Exists with no key tolerates every"),
    ({"kubernetes": {"pod": {"capabilities": ["SYS_ADMIN"]}}}, "capabilities: SYS_ADMIN: nearly root"),
    ({"kubernetes": {"pod": {"capabilities": ["SYS_PTRACE", "ALL"]}}}, "capabilities: ALL"),
    ({"kubernetes": {"pod": {"capabilities": ["PERFMON"]}}}, "PERFMON: beyond the Pod Security Standards"),
    ({"kubernetes": {"pod": {"annotations": {"container.apparmor.security.beta.kubernetes.io/worker": "unconfined"}}}},
     "apparmor.security.beta.kubernetes.io/worker: unconfined"),
    ({"kubernetes": {"pod": {"annotations": {"seccomp.security.alpha.kubernetes.io/pod": "Unconfined"}}}},
     "seccomp.security.alpha.kubernetes.io/pod"),
    ({"kubernetes": {"pod": {"host_network": True}}}, "host_network: the pods share the nodes' network"),
    ({"kubernetes": {"checkpoint_host_path": "/var/lib/poc"}}, "checkpoint_host_path: a hostPath volume under"),
    ({"kubernetes": {"pod": {"priority_class": "system-node-critical"}}}, "preempt other users'"),
    ({"ux": {"kubernetes": {"pod": {"capabilities": ["SYS_ADMIN"]}}}}, "ux.kubernetes.pod.capabilities: SYS_ADMIN"),
    ({"slurm": {"accept_unknown_host": True, "host": "login1"}}, "slurm.accept_unknown_host"),
    ({"slurm": {"transport": "rest", "rest": {"url": "http://127.0.0.1:6820", "allow_insecure_http": True}}},
     "token crosses http://127.0.0.1:6820 unencrypted"),
    ({"drills": {"commands": {"slurm": {"restart": [{"component": "ctld", "argv": ["systemctl", "restart", "x"]}]}}}},
     "runs 'systemctl restart x' on this machine"),
]


@pytest.mark.parametrize("data, said", CHOICES)
def test_each_security_relevant_choice_is_said(data, said):
    found = review.warnings(cfgmod.from_mapping(data))
    assert any(said in w for w in found), found


def test_ordinary_configs_say_nothing():
    assert review.warnings(cfgmod.from_mapping({})) == []
    ordinary = {"platforms": ["k8s", "slurm"], "fabric": {"env": {"NCCL_DEBUG": "INFO"}},
                "slurm": {"extra_sbatch": ["--export=NONE", "--exclusive"]},
                "kubernetes": {"pod": {"capabilities": ["IPC_LOCK"], "priority_class": "training-high",
                                       "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                                       "annotations": {"k8s.v1.cni.cncf.io/networks": "ib-net"}}}}
    assert review.warnings(cfgmod.from_mapping(ordinary)) == []


def test_validate_prints_each_as_a_warning_and_in_its_json(tmp_path, capsys):
    p = tmp_path / "shared.yaml"
    p.write_text("kubernetes:\n  pod:\n    capabilities: [SYS_ADMIN]\n    host_network: true\n")
    assert main(["validate", "--config", str(p)]) == 0
    out = capsys.readouterr()
    assert out.err.count("WARNING kubernetes.pod.") == 2 and out.out.startswith("OK ")
    assert main(["validate", "--config", str(p), "-o", "json", "--quiet"]) == 0
    out = capsys.readouterr()
    assert len(json.loads(out.out)["warnings"]) == 2 and out.err.count("WARNING") == 2


def test_run_says_them_and_keeps_them_in_campaign_json(tmp_path, capsys):
    p = tmp_path / "shared.yaml"
    p.write_text("fabric:\n  env: {LD_PRELOAD: /tmp/x.so}\n")

    def fake(cfg, platforms, store: Store, make_backend, *, resume, **_kw):
        store.open(cfg.config_hash(), cfg.redacted(), resume=False)
        store.close()
        return []
    assert main(["run", "--config", str(p), "--results", str(tmp_path / "r")], campaign_fn=fake) == 0
    assert "WARNING fabric.env: sets LD_PRELOAD" in capsys.readouterr().err
    meta = json.loads((tmp_path / "r" / "smoke" / "campaign.json").read_text())
    assert meta["config_warnings"] == [w for w in review.warnings(cfgmod.load(p))]
    assert meta["config"]["fabric"]["env"] == {"LD_PRELOAD": "/tmp/x.so"}
