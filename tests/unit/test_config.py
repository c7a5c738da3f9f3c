import subprocess
import sys

import pytest
import yaml

from harness import config as cfgmod
from harness import imageref
from harness.cli import main
from harness.errors import ConfigError


def test_default_yaml_matches_model_defaults():
    from_yaml = cfgmod.load(None)
    assert from_yaml.model_dump() == cfgmod.Config().model_dump()


def test_config_show_round_trips(capsys, tmp_path):
    assert main(["config", "show"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("#")  # commented, for a user to edit
    p = tmp_path / "poc.yaml"
    p.write_text(text)
    assert cfgmod.load(p).model_dump() == cfgmod.Config().model_dump()


@pytest.mark.parametrize("doc, where, what", [
    ({"workload": {"steps": 0}}, "workload.steps", "greater than or equal to 1"),
    ({"workload": {"stpes": 5}}, "workload.stpes", "Extra inputs are not permitted"),
    ({"resources": {"nodes": "two"}}, "resources.nodes", "valid integer"),
    ({"slurm": {"transport": "telnet"}}, "slurm.transport", "'local', 'ssh' or 'rest'"),
    ({"slurm": {"transport": "pyslurm"}}, "slurm.transport", "PyPI has pyslurm 25.11 only"),
    ({"slurm": {"partition": "gpu; rm -rf /"}}, "slurm.partition", "letters, digits"),
    ({"slurm": {"extra_sbatch": ["--wrap=$(id)"]}}, "slurm.extra_sbatch", "not a plain --option"),
    ({"slurm": {"container": "pyxis"}}, "slurm", "needs slurm.container_image"),
    ({"faults": [{"kind": "kill_rank", "at_step": 5, "rank": 7}]}, "<top level>", "rank 7 does not exist"),
    ({"faults": [{"kind": "melt", "at_step": 5}]}, "faults[0].kind", "kill_rank"),
    ({"platforms": ["openshift"]}, "platforms", "unknown platform"),
    ({"kubernetes": {"namespace": "Bad_NS"}}, "kubernetes.namespace", "DNS label"),
    ({"workload": {"sweep": "64M:1K"}}, "workload.sweep", "LO must not exceed HI"),
    ({"pricing": {"k8s": {"usd_per_hour": 2, "unit": "gpu"}}, "platforms": ["k8s"]}, "<top level>", "per GPU"),
])
def test_bad_values_name_the_field(doc, where, what):
    with pytest.raises(ConfigError) as ei:
        cfgmod.from_mapping(doc, "x.yaml")
    assert f"x.yaml: {where}: " in ei.value.message
    assert what in ei.value.message
    assert ei.value.tip
    assert ei.value.exit_code == 2


@pytest.mark.parametrize("doc, tip", [
    ({"workload": {"stpes": 5}}, "remove the key or fix its spelling"),
    ({"slurm": {"transport": "telnet"}}, "use one of the values listed"),
    ({"slurm": {"transport": "pyslurm"}}, "use slurm.transport: ssh (a login node over ssh), rest"),
    ({"workload": {"steps": 0}}, "fix the value; `poc config show` documents each field"),
    ({"kubernetes": {"image": "$(reboot)"}}, "an image reference is [registry[:port]/]name"),
    ({"slurm": {"container": "pyxis", "container_image": "$(reboot)"}}, "pyxis takes [user@][registry#]image"),
])
def test_the_tip_fits_the_error(doc, tip):
    with pytest.raises(ConfigError) as ei:
        cfgmod.from_mapping(doc)
    assert ei.value.tip.startswith(tip)


def test_cli_reports_bad_file_without_traceback(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump({"workload": {"steps": -3}, "resources": {"nodes": 0}}))
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "validate", "--config", str(p)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert any(line.startswith("ERROR ") and "workload.steps" in line for line in lines)
    assert any(line.startswith("ERROR ") and "resources.nodes" in line for line in lines)
    assert any(line.startswith("TIP ") for line in lines)


def test_pyslurm_transport_is_refused_at_validation(capsys):
    """Refused when the config is read, not when a run first needs the transport."""
    assert main(["validate", "--set", "slurm.transport=pyslurm"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("ERROR ") and "slurm.transport: pyslurm is not supported" in err[0], err
    assert err[1].startswith("TIP use slurm.transport: ssh"), err
    assert "Traceback" not in "\n".join(err)


def test_broken_yaml_gives_line(tmp_path):
    p = tmp_path / "broken.yaml"
    p.write_text("workload:\n  steps: [1,\n")
    with pytest.raises(ConfigError) as ei:
        cfgmod.load(p)
    assert "not valid YAML at line" in ei.value.message


def test_missing_file():
    with pytest.raises(ConfigError) as ei:
        cfgmod.load("/nonexistent/poc.yaml")
    assert "does not exist" in ei.value.message and "poc config show" in ei.value.tip


def test_config_hash_ignores_connection_details():
    a = cfgmod.from_mapping({"slurm": {"host": "a", "user": "x"}})
    b = cfgmod.from_mapping({"slurm": {"host": "b", "user": "y"}})
    c = cfgmod.from_mapping({"workload": {"steps": 41}})
    assert a.config_hash() == b.config_hash() != c.config_hash()


def test_redacted_hides_secret_paths():
    c = cfgmod.from_mapping({"slurm": {"key_file": "/home/me/.ssh/id_secret"},
                             "kubernetes": {"kubeconfig": "/etc/kc", "image": "reg.example/t:1"}})
    red = c.redacted()
    assert "/home/me" not in str(red) and red["slurm"]["key_file"].endswith("id_secret")
    c = cfgmod.from_mapping({"slurm": {"transport": "rest", "rest": {"token_file": "/home/me/.slurm/jwt"}}})
    assert "/home/me" not in str(c.redacted()) and c.redacted()["slurm"]["rest"]["token_file"].endswith("jwt")


def test_connection_details_do_not_change_the_config_hash():
    a = cfgmod.from_mapping({"slurm": {"host": "login1", "proxy_jump": "bastion"}})
    b = cfgmod.from_mapping({"slurm": {"host": "login2", "ssh_config": None,
                                       "rest": {"url": "https://r.example:6820", "token_env": "T"}}})
    assert a.config_hash() == b.config_hash()
    assert a.config_hash() != cfgmod.from_mapping({"fabric": {"env": {"NCCL_IB_HCA": "^mlx5_2"}}}).config_hash()


def test_platform_aliases():
    assert cfgmod.from_mapping({"platforms": ["kubernetes", "Slurm"]}).platforms == ["k8s", "slurm"]


def test_checkpoint_pvc_reaches_the_jobset():
    from harness.backends.k8s import KubernetesBackend
    from harness.spec import build

    cfg = cfgmod.from_mapping({"kubernetes": {"checkpoint_pvc": "ckpt-claim", "image": "example/worker:1"}})
    rendered = KubernetesBackend.from_config(cfg).render(build(cfg, "k8s", "k8s-clean-01", None))
    assert "claimName: ckpt-claim" in "".join(rendered.files.values())
    with pytest.raises(ConfigError, match=r"kubernetes\.checkpoint_pvc"):
        cfgmod.from_mapping({"kubernetes": {"checkpoint_pvc": "Bad Claim"}})


# ------------------------------------------------------------------ image references (harness/imageref.py)

DIGEST = "sha256:" + "0123456789abcdef" * 4
GOOD_REFS = ["localhost/poc-worker:abc", f"registry:5000/a/b:tag@sha256:{'a' * 64}", "nvcr.io/nvidia/pytorch:24.05-py3",
             "ubuntu", f"ubuntu@{DIGEST}", "k8s-slurm-poc/worker:trixie-53a353b73686", "[::1]:5000/x/y:1",
             "Registry.Example.com/team/torch:V2_x", "a_b__c--d.e/f"]
BAD_REFS = [
    ("$(reboot)", "is not an image reference"),
    ("bad image", "is not an image reference"),
    ("busybox;reboot", "is not an image reference"),
    ("example.com/Team/torch:2.4", "upper-case"),
    ("UPPER/repo:1", "upper-case letters in 'UPPER'"),
    ("ubuntu:", "is not an image reference"),
    (":2.4", "is not an image reference"),
    ("ubuntu@sha256:abc", "is not an image reference"),
    (f"ubuntu@{DIGEST[:-1]}", "63 hex digits, not 64"),
    ("ubuntu@md5:" + "a" * 32, "unknown algorithm 'md5'"),
    ("x" * 256, "longer than 255"),
    ("", "is empty"),
]


@pytest.mark.parametrize("ref", GOOD_REFS)
def test_image_references_of_the_oci_grammar_are_accepted(ref):
    assert imageref.reference_problem(ref) is None
    assert cfgmod.from_mapping({"kubernetes": {"image": ref}}).kubernetes.image == ref


@pytest.mark.parametrize("ref, what", BAD_REFS)
def test_bad_image_references_name_the_field(ref, what):
    with pytest.raises(ConfigError) as ei:
        cfgmod.from_mapping({"kubernetes": {"image": ref}}, "x.yaml")
    assert ei.value.message.startswith(f"x.yaml: kubernetes.image: {ref!r} ")
    assert what in ei.value.message
    assert "[registry[:port]/]name[:tag][@digest]" in ei.value.tip
    assert ei.value.exit_code == 2


@pytest.mark.parametrize("container, image", [
    ("pyxis", "nvcr.io#nvidia/pytorch:24.05-py3"), ("pyxis", "me@nvcr.io#nvidia/pytorch:24.05-py3"),
    ("pyxis", "ubuntu:22.04"), ("pyxis", "/shared/images/worker.sqsh"), ("apptainer", "/shared/images/worker.sif"),
    ("apptainer", "worker.sif"), ("apptainer", "docker://ubuntu:22.04"), ("apptainer", "library://sylabs/default/alpine:3.7"),
])
def test_slurm_container_images_accepted(container, image):
    cfg = cfgmod.from_mapping({"slurm": {"container": container, "container_image": image}})
    assert cfg.slurm.container_image == image


@pytest.mark.parametrize("container, image, what", [
    ("pyxis", "x`reboot`", "not an image reference for pyxis"),
    ("pyxis", "nvcr.io#Nvidia/pytorch:24.05", "upper-case"),
    ("pyxis", "m e@nvcr.io#nvidia/pytorch", "user name"),
    ("apptainer", "x`reboot`", "a path with characters"),
    ("apptainer", "/shared/$(reboot).sif", "a path with characters"),
    ("apptainer", "docker://$(reboot)", "not an image reference (after docker://)"),
    ("apptainer", "https://example.com/x.sif", "not a path or a docker://"),
])
def test_bad_slurm_container_images_name_the_field(container, image, what):
    with pytest.raises(ConfigError) as ei:
        cfgmod.from_mapping({"slurm": {"container": container, "container_image": image}}, "x.yaml")
    assert ei.value.message.startswith(f"x.yaml: slurm.container_image: {image!r} ")
    assert what in ei.value.message
    assert "pyxis takes" in ei.value.tip and ei.value.exit_code == 2


# ------------------------------------------------------------------ poc validate runs what rendering runs

@pytest.mark.parametrize("doc, field", [
    ({"kubernetes": {"image": "$(reboot)"}}, "kubernetes.image"),
    ({"slurm": {"container": "pyxis", "container_image": "x`reboot`"}}, "slurm.container_image"),
])
def test_validate_refuses_what_render_refuses(tmp_path, capsys, doc, field):
    p = tmp_path / "poc.yaml"
    p.write_text(yaml.safe_dump(doc))
    assert main(["validate", "--config", str(p)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"ERROR {p}: {field}: ") and err[1].startswith("TIP ")
    assert main(["render", "--config", str(p), "--platform", "k8s"]) == 2


def test_validate_runs_the_renderers_checks():
    """A value the model never saw (assigned without validation) still fails validate, through the
    renderer's own check: validate and render share it."""
    from harness.render.validate import check_config
    from harness.scenarios import submitted_specs

    cfg = cfgmod.from_mapping({"platforms": ["slurm"]})
    assert check_config(cfg, submitted_specs) == 6   # every platform x (1 clean run + the default kill_rank fault)
    bad = cfg.model_copy(update={"slurm": cfg.slurm.model_copy(update={"container": "apptainer",
                                                                       "container_image": "x`reboot`"})})
    with pytest.raises(ConfigError, match=r"slurm.container_image 'x`reboot`' is a path"):
        check_config(bad, submitted_specs)


@pytest.mark.parametrize("doc", [
    {},
    {"kubernetes": {"image": f"registry:5000/team/torch:2.4@sha256:{'b' * 64}"}, "contention": {"runs": 1}},
    {"slurm": {"container": "pyxis", "container_image": "nvcr.io#nvidia/pytorch:24.05-py3"}, "repetitions": 2},
])
def test_a_config_that_validates_renders_on_every_platform(tmp_path, monkeypatch, capsys, doc):
    monkeypatch.setenv("POC_STATE_DIR", str(tmp_path / "state"))   # no local cluster's connection file
    p = tmp_path / "poc.yaml"
    p.write_text(yaml.safe_dump(doc))
    assert main(["validate", "--config", str(p), "--quiet"]) == 0
    for plat in cfgmod.PLATFORMS:
        assert main(["render", "--config", str(p), "--platform", plat, "--out", str(tmp_path / plat)]) == 0, plat
    capsys.readouterr()


def test_a_gpu_campaign_sweeps_to_at_least_1g_for_its_headline_busbw():
    config = cfgmod
    gpu = {"platforms": ["slurm"], "resources": {"gpus_per_node": 8, "procs_per_node": 8}}
    assert config.from_mapping(gpu).workload.sweep == "1K:4G"             # the default with GPUs
    assert config.from_mapping({**gpu, "workload": {"sweep": "1K:1G"}}).workload.sweep == "1K:1G"
    with pytest.raises(ConfigError, match="must reach at least 1G"):
        config.from_mapping({**gpu, "workload": {"sweep": "1K:64M"}})
    # CPUs (and GPUs simulated on CPUs) keep the CPU default
    assert config.from_mapping({"platforms": ["slurm"]}).workload.sweep == "1K:64M"
    sim = {**gpu, "workload": {"simulated_gpus": True}}
    assert config.from_mapping(sim).workload.sweep == "1K:64M"


def test_real_gpus_hold_whole_nodes_by_default_on_both_platforms():
    from harness import spec
    from harness.render.jobset import JOBSET_NAME_LABEL, render_jobset
    from harness.render.sbatch import render_sbatch

    def run(**resources):
        c = cfgmod.from_mapping({"platforms": ["slurm", "k8s"], "resources": resources})
        s, k = spec.build(c, "slurm", "slurm-clean-01", None), spec.build(c, "k8s", "k8s-clean-01", None)
        anti = render_jobset(k, c.kubernetes, "img:1", "/ck").jobset["spec"]["replicatedJobs"][0]["template"][
            "spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        others = [t for t in anti if "matchExpressions" in t["labelSelector"]]
        return s.exclusive, "#SBATCH --exclusive\n" in render_sbatch(s, c.slurm).script, k.exclusive, others

    gpu = {"gpus_per_node": 8, "procs_per_node": 8}
    excl, sbatch, k8s, others = run(**gpu)
    assert excl and sbatch and k8s
    # no pod of the run's namespace but its own (NotIn matches pods without the label too), and no other
    # JobSet's pod in any namespace
    assert others == [{"labelSelector": {"matchExpressions": [
        {"key": JOBSET_NAME_LABEL, "operator": "NotIn", "values": ["k8s-clean-01"]}]},
        "topologyKey": "kubernetes.io/hostname"},
        {"labelSelector": {"matchExpressions": [
            {"key": JOBSET_NAME_LABEL, "operator": "Exists"},
            {"key": JOBSET_NAME_LABEL, "operator": "NotIn", "values": ["k8s-clean-01"]}]},
         "namespaceSelector": {}, "topologyKey": "kubernetes.io/hostname"}]
    assert run() == (False, False, False, [])                                  # CPUs: shared by default
    assert run(**gpu, exclusive=False)[:3] == (False, False, False)            # a site may say so
    assert run(exclusive=True)[:3] == (True, True, True)
