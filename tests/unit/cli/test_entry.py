"""The CLI's conventions: config overrides and their precedence, -o formats, the config schema, exit codes,
the progress line's run count and ETA, logging."""
import json
import subprocess
import sys

import jsonschema
import pytest
import yaml

from harness import config as cfgmod
from harness.cli import main
from harness.cli.output import RunCounter


def _steps(capsys, argv, env):
    assert main(["config", "show", *argv, "-o", "json"], env=env) == 0
    return json.loads(capsys.readouterr().out)["workload"]["steps"]


def test_overrides_file_then_environment_then_set(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("workload: {steps: 20}\n")
    env = {"POC_WORKLOAD__STEPS": "30", "POC_CACHE_DIR": "/tmp/x", "HOME": "/root"}
    assert _steps(capsys, ["--config", str(cfg)], {}) == 20
    assert _steps(capsys, ["--config", str(cfg)], env) == 30
    assert _steps(capsys, ["--config", str(cfg), "--set", "workload.steps=40"], env) == 40
    assert _steps(capsys, ["--config", str(cfg), "--set", "workload.steps=40", "--set", "workload.steps=50"], env) == 50


def test_set_takes_yaml_flow_values_and_is_validated_like_the_file(capsys):
    assert main(["config", "show", "--set", "platforms=[slurm, kubernetes]", "--set", "contention.runs=2",
                 "--set", "faults.0.at_step=12", "-o", "json"], env={}) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["platforms"] == ["slurm", "k8s"] and d["contention"]["runs"] == 2 and d["faults"][0]["at_step"] == 12
    assert main(["validate", "--set", "workload.stepz=1"], env={}) == 2
    err = capsys.readouterr().err
    assert "ERROR <built-in default> with workload.stepz from --set: workload.stepz: Extra inputs" in err
    assert main(["validate", "--set", "repetitions"], env={}) == 2
    assert "expected KEY.PATH=VALUE" in capsys.readouterr().err
    assert main(["validate", "--set", "faults.9.rank=1"], env={}) == 2
    assert "not an index of the list at faults" in capsys.readouterr().err


def test_a_misspelt_environment_section_is_an_error_and_unrelated_poc_variables_are_not(capsys):
    assert main(["validate"], env={"POC_WORKLAOD__STEPS": "3"}) == 2
    assert "ERROR environment variable POC_WORKLAOD__STEPS: 'worklaod' is not a config section" in \
        capsys.readouterr().err
    assert main(["validate", "--json"], env={"POC_STATE_DIR": "/x", "POC_RUN_ID": "r"}) == 0
    assert json.loads(capsys.readouterr().out)["overrides"] == []


def test_the_overrides_applied_are_recorded_with_the_campaign(tmp_path):
    def fake(cfg, platforms, store, make_backend, *, resume, **_kw):
        store.open(cfg.config_hash(), cfg.redacted(), resume)
        store.close()
        return []
    assert main(["run", "--results", str(tmp_path), "--set", "workload.steps=32"], campaign_fn=fake,
                env={"POC_REPETITIONS": "2"}) == 0
    meta = json.loads((tmp_path / "smoke" / "campaign.json").read_text())
    assert meta["overrides"] == [{"key": "repetitions", "from": "env POC_REPETITIONS"},
                                 {"key": "workload.steps", "from": "--set"}]
    assert meta["config"]["workload"]["steps"] == 32 and meta["config"]["repetitions"] == 2


def test_config_schema_validates_the_default_config(capsys):
    assert main(["config", "schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(cfgmod.load(None).model_dump(mode="json"), schema)
    default = yaml.safe_load(cfgmod.default_yaml())
    jsonschema.validate(default, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**default, "repetitions": "many"}, schema)


def test_json_means_json_for_render_and_config_show(capsys):
    assert main(["render", "--platform", "local", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["platforms"]["local"]["launch.sh"].startswith("#!/usr/bin/env bash")
    assert main(["config", "show", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["campaign"] == "smoke"
    assert main(["config", "show", "-o", "yaml"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["campaign"] == "smoke"
    assert main(["config", "show"]) == 0
    assert capsys.readouterr().out == cfgmod.default_yaml()   # the commented file, to save and edit
    assert main(["validate", "-o", "yaml"], env={}) == 0
    assert yaml.safe_load(capsys.readouterr().out)["ok"] is True


def test_report_and_rederive_take_no_config(capsys, tmp_path):
    for cmd in ("report", "rederive"):
        with pytest.raises(SystemExit) as ei:
            main([cmd, str(tmp_path), "--config", "x.yaml"])
        assert ei.value.code == 2
        assert "unrecognized arguments: --config" in capsys.readouterr().err


def _help(capsys, argv) -> str:
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    return capsys.readouterr().out


def test_every_subcommand_has_a_description_and_an_example(capsys):
    for argv in (["run"], ["status"], ["list"], ["logs"], ["cancel"], ["cleanup"], ["render"], ["report"],
                 ["rederive"], ["validate"], ["config", "show"], ["config", "schema"], ["smoke"]):
        out = _help(capsys, argv)
        assert "\nexample:\n  poc " in out, argv
        if "--platform" in out:
            assert "{local,slurm,k8s}" in out, argv
    top = _help(capsys, [])
    assert "exit codes:" in top and "  3    a harness error" in top and "  130  interrupted" in top
    out = subprocess.run([sys.executable, "-m", "harness.cli", "--version"], capture_output=True, text=True,
                         check=True).stdout
    assert out.startswith("poc ")   # python -m harness.cli still runs the command


def _campaign_returning(*statuses):
    def fake(cfg, platforms, store, make_backend, *, resume, on_record, **_kw):
        recs = [{"run_id": f"local-clean-{i:02d}", "platform": "local", "scenario": "clean", "status": s,
                 **({"error": {"stage": "run", "origin": "harness" if s == "harness_error" else "platform",
                               "message": "boom"}} if s != "ok" else {})}
                for i, s in enumerate(statuses, 1)]
        for r in recs:
            on_record(r)
        return recs
    return fake


@pytest.mark.parametrize("statuses, code", [(("ok", "ok"), 0), (("ok", "failed"), 1),
                                            (("failed", "harness_error"), 3), (("harness_error",), 3)])
def test_exit_codes_tell_a_platform_failure_from_a_harness_error(tmp_path, statuses, code):
    assert main(["run", "--results", str(tmp_path), "-q"], campaign_fn=_campaign_returning(*statuses)) == code


def test_run_and_report_print_a_table_when_asked_and_nothing_on_stdout_otherwise(tmp_path, capsys):
    """-o table is honoured by the commands whose human view is their progress on stderr: a table of the runs
    recorded (run), of the files written (report); without -o their stdout stays empty, as it was."""
    fake = _campaign_returning("ok", "failed")
    assert main(["run", "--results", str(tmp_path), "-o", "table"], campaign_fn=fake) == 1
    out, err = capsys.readouterr()
    assert out.splitlines() == ["RUN             PLATFORM  SCENARIO  STATUS  DETAIL",
                                "local-clean-01  local     clean     ok      queue –s  startup –s  busbw – GB/s  "
                                "step –s  cost/step $–",
                                "local-clean-02  local     clean     failed  at run: boom"]
    assert "local-clean-02: failed at run: boom" in err
    assert main(["run", "--results", str(tmp_path / "again")], campaign_fn=_campaign_returning("ok")) == 0
    assert capsys.readouterr().out == ""
    from support.paths import RESULTS
    assert main(["report", str(RESULTS / "serve-2026-12-06"), "--out", str(tmp_path / "rep"), "-o", "table"]) == 0
    out, err = capsys.readouterr()
    rows = out.splitlines()
    assert rows[0].split() == ["FILE", "PATH"] and rows[1].split() == ["report.md", str(tmp_path / "rep" / "report.md")]
    assert any(r.startswith("charts/decision.png ") for r in rows) and err == ""


def test_bad_input_is_exit_code_2(tmp_path):
    assert main(["run", "--results", str(tmp_path), "--set", "repetitions=-1"], campaign_fn=_campaign_returning()) == 2
    with pytest.raises(SystemExit) as ei:
        main(["run", "-o", "xml"])
    assert ei.value.code == 2


def test_run_counter_counts_the_plan_and_estimates_from_finished_runs():
    c = RunCounter({"local": 3, "slurm": 2})
    assert c.total == 5 and c.where() == "run 1/5 " and c.eta(3.0) is None
    c.record({"platform": "local", "started_at": 0.0, "finished_at": 10.0})
    c.record({"platform": "slurm", "started_at": 10.0, "finished_at": 40.0})
    assert c.where() == "run 3/5 " and c.eta(5.0) == pytest.approx(20.0 * 3 - 5.0)
    c.record({"platform": "slurm", "scenario": "preflight", "status": "failed"})   # the rest of slurm is dropped
    assert c.total == 4 and c.where() == "run 3/4 "


def test_the_progress_line_says_run_n_of_m_less_what_a_resume_skips(tmp_path, capsys):
    def fake(cfg, platforms, store, make_backend, *, resume, progress, on_record, **_kw):
        progress("local", "local-clean-01", "queue", 1.0)
        return []
    assert main(["run", "--results", str(tmp_path)], campaign_fn=fake) == 0
    err = capsys.readouterr().err
    assert "(2 runs)" in err and "[local] run 1/2 local-clean-01: queue" in err   # the default plan: clean + kill_rank
    (tmp_path / "smoke").mkdir(exist_ok=True)
    (tmp_path / "smoke" / "runs.jsonl").write_text(json.dumps(
        {"schema": 1, "run_id": "local-clean-01", "platform": "local", "status": "ok"}) + "\n")
    assert main(["run", "--results", str(tmp_path), "--resume"], campaign_fn=fake) == 0
    assert "(1 runs)" in capsys.readouterr().err


def test_verbose_and_log_file_configure_logging(tmp_path, capsys):
    log = tmp_path / "poc.log"
    assert main(["validate", "--log-file", str(log), "--set", "repetitions=2"], env={}) == 0
    text = log.read_text()
    assert "INFO harness.cli: poc validate --log-file" in text and "repetitions from --set" in text
    assert "INFO" not in capsys.readouterr().err   # without -v, stderr stays as it was
    assert main(["validate", "-v"], env={}) == 0
    assert "INFO harness.cli: poc validate -v" in capsys.readouterr().err
    assert main(["validate", "--log-file", str(tmp_path / "no" / "dir.log")]) == 2
