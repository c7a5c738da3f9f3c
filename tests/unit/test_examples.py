"""The example configs in examples/ (docs/gpu-guide.md): each validates, renders as golden files, and
every key it uses is documented.

Each example renders through its platforms' backends, as `poc render --config examples/X.yaml
--platform P` prints it (no cluster is contacted): the first planned run's files, compared byte for byte
with tests/fixtures/golden/examples/<example>/<platform>/. POC_UPDATE_GOLDEN=1 rewrites them after review.
The workload script's text and hash are replaced by placeholders: they change with the workload, which
has tests of its own, not with the example.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml
from support.paths import ROOT

from harness import config, scenarios
from harness.backends.factory import make_backend
from harness.render.validate import check_config
from harness.scenarios import submitted_specs

EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
GOLDEN = ROOT / "tests" / "fixtures" / "golden" / "examples"
GUIDE = ROOT / "docs" / "gpu-guide.md"
UPDATE = os.environ.get("POC_UPDATE_GOLDEN") == "1"
_SHA = re.compile(r"(poc/workload-sha256: )[0-9a-f]{64}")


def _ids(paths):
    return [p.stem for p in paths]


def test_there_are_examples_for_every_setup_the_guide_covers():
    assert {p.stem for p in EXAMPLES} >= {"slurm-pyxis", "slurm-apptainer", "slurm-venv-modules", "slurm-rest",
                                          "k8s-gpu-operator-hostnetwork", "k8s-secondary-networks", "gpu-campaign"}


@pytest.mark.parametrize("path", EXAMPLES, ids=_ids(EXAMPLES))
def test_example_validates(path):
    """What `poc validate --config examples/X.yaml` checks: the config model, then every renderer's checks."""
    cfg = config.load(path)
    assert check_config(cfg, submitted_specs) > 0
    assert cfg.resources.gpus_per_node > 0 and not cfg.workload.simulated_gpus, "the examples are for real GPUs"
    assert cfg.workload.model == "transformer"


def _stable(name: str, text: str) -> str:
    text = _SHA.sub(r"\g<1><sha256 of the workload>", text)
    if name == "workload-configmap.yaml":
        doc = yaml.safe_load(text)
        doc["data"] = {k: f"<the text of workloads/{k}>" for k in doc["data"]}
        text = yaml.safe_dump(doc, sort_keys=False, width=120)
    return text


def rendered(path: Path) -> dict[str, str]:
    """{"<platform>/<file>": text} for the first planned run of every platform the example lists."""
    cfg = config.load(path)
    out = {}
    for platform in cfg.platforms:
        s = scenarios.job_spec(cfg, platform, scenarios.plan(cfg, platform)[0])
        for name, text in make_backend(platform, cfg).render(s).files.items():
            out[f"{platform}/{name}"] = _stable(name, text)
    return out


@pytest.mark.parametrize("path", EXAMPLES, ids=_ids(EXAMPLES))
def test_example_renders_as_its_golden_files(path):
    files = rendered(path)
    base = GOLDEN / path.stem
    if UPDATE:
        for old in base.glob("*/*"):
            old.unlink()
        for rel, text in files.items():
            (base / rel).parent.mkdir(parents=True, exist_ok=True)
            (base / rel).write_text(text)
    on_disk = sorted(str(p.relative_to(base)) for p in base.glob("*/*"))
    assert on_disk == sorted(files), f"{base}: golden files differ from the rendered set; POC_UPDATE_GOLDEN=1"
    for rel, text in files.items():
        assert text == (base / rel).read_text(), f"{base / rel} differs; POC_UPDATE_GOLDEN=1 rewrites it after review"


@pytest.mark.parametrize("path", EXAMPLES, ids=_ids(EXAMPLES))
def test_adapter_lists_are_exact_names_not_prefixes(path):
    """NCCL reads NCCL_IB_HCA names as prefixes unless the list starts with `=` (or `^=`): `mlx5_1`
    also selects mlx5_10 and mlx5_11, `mlx5` every adapter, storage ports included."""
    hca = (config.load(path).fabric.env or {}).get("NCCL_IB_HCA")
    if hca is not None:
        assert hca.startswith(("=", "^=")), f"{path.name}: NCCL_IB_HCA {hca!r} is a prefix match"


def test_goldens_show_the_settings_each_example_is_about():
    """A few lines per example that must reach what the scheduler receives (not only the config)."""
    g = {p.stem: rendered(p) for p in EXAMPLES}
    pyxis = g["slurm-pyxis"]["slurm/job.sbatch"]
    for line in ("#SBATCH --gpus-per-node=8", "#SBATCH --reservation=ml-poc", "#SBATCH --constraint=h100&ib",
                 "#SBATCH --switches=1@00:10:00", "NCCL_IB_HCA==mlx5_0,mlx5_1"):
        assert line in pyxis, line
    assert "--container-image=/lustre/ml-team/images/pytorch-24.05.sqsh" in pyxis
    assert pyxis.index("printf 'import_start") < pyxis.index("printf 'srun_start")     # the timed import step
    app = g["slurm-apptainer"]["slurm/job.sbatch"]
    assert "#SBATCH --gpus-per-node=h100:8" in app and re.search(r"apptainer\s+\\?\s*exec\s+\\?\s*--nv", app)
    venv = g["slurm-venv-modules"]["slurm/job.sbatch"]
    assert "module load cuda" in venv and "/lustre/ml-team/venvs/torch/bin/activate" in venv
    assert "slurm/job.rest.json" in g["slurm-rest"]
    gpu_toleration = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    for name, ifname in (("k8s-gpu-operator-hostnetwork", "ib0"), ("k8s-secondary-networks", "eth0"),
                         ("gpu-campaign", "ib0")):
        js = yaml.safe_load(g[name]["k8s/jobset.yaml"])
        pod = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
        c = pod["spec"]["containers"][0]
        assert c["resources"]["limits"]["nvidia.com/gpu"] == "8", name
        assert {e["name"]: e.get("value") for e in c["env"]}["NCCL_SOCKET_IFNAME"] == ifname, name
        assert gpu_toleration in pod["spec"]["tolerations"], name
        assert "IPC_LOCK" in c["securityContext"]["capabilities"]["add"], name
    hostnet = yaml.safe_load(g["k8s-gpu-operator-hostnetwork"]["k8s/jobset.yaml"])
    pod = hostnet["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert pod["spec"]["hostNetwork"] is True
    assert pod["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] == \
        "network.topology.example.com/block"
    multus = yaml.safe_load(g["k8s-secondary-networks"]["k8s/jobset.yaml"])
    pod = multus["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert "hostNetwork" not in pod["spec"] or pod["spec"]["hostNetwork"] is False
    assert pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"].startswith("ml-team-b/ib-net-0")
    assert pod["spec"]["containers"][0]["resources"]["limits"]["rdma/rdma_shared_device_a"] == "1"


# ------------------------------------------------------------------ every key is documented

def _key_paths(data, default, path=()):
    """(path, documented_by_default) for every mapping key in data, walked beside the default config:
    a key the default config has at the same place is documented there (with its comment); any other
    key (an NCCL variable, a node label, a resource name, a price set) must be explained in the guide."""
    if isinstance(data, dict):
        for k, v in data.items():
            has = isinstance(default, dict) and k in default
            yield (*path, str(k)), has
            yield from _key_paths(v, default.get(k) if has else None, (*path, str(k)))
    elif isinstance(data, list):
        item_default = default[0] if isinstance(default, list) and default else None
        for v in data:
            yield from _key_paths(v, item_default, (*path, "[]"))


@pytest.mark.parametrize("path", EXAMPLES, ids=_ids(EXAMPLES))
def test_every_key_is_documented(path):
    default = yaml.safe_load(config.default_yaml())
    guide = GUIDE.read_text(encoding="utf-8")
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    # in the guide: in back-quotes, alone (`NCCL_IB_HCA`) or starting a quoted example (`rdma/ib: "1"`)
    missing = [".".join(p) for p, in_default in _key_paths(data, default)
               if not in_default and not re.search(rf"`{re.escape(p[-1])}[`:]", guide)]
    assert not missing, f"{path.name}: keys neither in the default config nor in docs/gpu-guide.md: {missing}"


def test_the_guide_names_every_example():
    guide = GUIDE.read_text(encoding="utf-8")
    for p in EXAMPLES:
        assert f"examples/{p.name}" in guide, p.name
