import subprocess
import sys

import pytest
import yaml

from harness import config as cfgmod
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
    ({"slurm": {"transport": "telnet"}}, "slurm.transport", "'local', 'ssh' or 'pyslurm'"),
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


def test_cli_reports_bad_file_without_traceback(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump({"workload": {"steps": -3}, "resources": {"nodes": 0}}))
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "validate", "--config", str(p)],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert any(l.startswith("ERROR ") and "workload.steps" in l for l in lines)
    assert any(l.startswith("ERROR ") and "resources.nodes" in l for l in lines)
    assert any(l.startswith("TIP ") for l in lines)


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
    c = cfgmod.from_mapping({"slurm": {"key_file": "/home/me/.ssh/id_secret"}, "kubernetes": {"kubeconfig": "/etc/kc"}})
    red = c.redacted()
    assert "/home/me" not in str(red) and red["slurm"]["key_file"].endswith("id_secret")


def test_platform_aliases():
    assert cfgmod.from_mapping({"platforms": ["kubernetes", "Slurm"]}).platforms == ["k8s", "slurm"]


def test_checkpoint_pvc_reaches_the_jobset():
    from harness.backends.k8s import KubernetesBackend
    from harness.spec import build

    cfg = cfgmod.from_mapping({"kubernetes": {"checkpoint_pvc": "ckpt-claim", "image": "example/worker:1"}})
    rendered = KubernetesBackend.from_config(cfg).render(build(cfg, "k8s", "k8s-clean-01", None))
    assert "claimName: ckpt-claim" in "".join(rendered.files.values())
    with pytest.raises(ConfigError, match="kubernetes.checkpoint_pvc"):
        cfgmod.from_mapping({"kubernetes": {"checkpoint_pvc": "Bad Claim"}})
