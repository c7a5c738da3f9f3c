"""`poc completion bash|zsh|tcsh`: scripts generated from the real parser name every command and option,
and bash, with the script loaded, completes them (the shells themselves run the scripts where installed)."""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess

import pytest

from harness.cli import build_parser, main
from harness.cli.completion_cmd import SHELLS


def _tree(parser: argparse.ArgumentParser, path=()) -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """Every command path of the parser ((), ("run",), ("cluster", "up"), ...) and its parser."""
    out = {path: parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.update(_tree(sub, (*path, name)))
    return out


TREE = _tree(build_parser())
COMMANDS = sorted({p[-1] for p in TREE if p})
COMMANDS_TOP = sorted(p[0] for p in TREE if len(p) == 1)
OPTIONS = sorted({o for p in TREE.values() for a in p._actions for o in a.option_strings if o.startswith("--")})


def _script(shell: str, capsys) -> str:
    assert main(["completion", shell]) == 0
    out = capsys.readouterr()
    assert out.err == ""
    return out.out


def test_the_parser_has_what_the_tests_below_look_for():
    assert {"run", "render", "report", "validate", "completion", "config", "show", "cluster", "up"} <= set(COMMANDS)
    assert {"--config", "--platform", "--results", "--set", "--repetitions", "--provider"} <= set(OPTIONS)


@pytest.mark.parametrize("shell", SHELLS)
def test_the_script_names_every_command_and_long_option(shell, capsys):
    text = _script(shell, capsys)
    words = set(re.findall(r"[A-Za-z0-9][A-Za-z0-9_-]*", text))
    assert [c for c in COMMANDS if c not in words] == []
    # tcsh lists long options without their dashes, after a 'c/--/' prefix
    assert [o for o in OPTIONS if o.removeprefix("--") not in words] == []


def _bash_complete(script: str, words: list[str], cwd=None) -> list[str]:
    """COMPREPLY of the script's completion function for the command line `words` (the last one being
    completed), as bash computes it on <TAB>."""
    prog = (
        'source /dev/stdin\n'
        'COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}\n'
        '"$(complete -p poc | sed -E "s/.*-F ([^ ]+) .*/\\1/")"\n'
        'printf "%s\\n" "${COMPREPLY[@]}"\n')
    res = subprocess.run(["bash", "--norc", "--noprofile", "-c", prog, "bash", *words], input=script,
                         capture_output=True, text=True, check=True, cwd=cwd, timeout=60)
    return [w for w in res.stdout.splitlines() if w]


def test_bash_completes_commands_options_and_choices(capsys):
    script = _script("bash", capsys)
    assert sorted(_bash_complete(script, ["poc", ""])) == COMMANDS_TOP
    run_opts = {o for a in TREE[("run",)]._actions for o in a.option_strings if o.startswith("--")}
    assert set(_bash_complete(script, ["poc", "run", "--"])) == run_opts
    assert _bash_complete(script, ["poc", "run", "--rep"]) == ["--repetitions"]
    assert set(_bash_complete(script, ["poc", "cluster", ""])) == {"up", "down", "status", "images"}
    assert set(_bash_complete(script, ["poc", "cluster", "up", "--provider", ""])) == {"auto", "native", "kind"}
    assert set(_bash_complete(script, ["poc", "completion", ""])) == set(SHELLS)


def test_bash_offers_directories_for_results_and_files_for_config(capsys, tmp_path):
    script = _script("bash", capsys)
    (tmp_path / "results-a").mkdir()
    (tmp_path / "results-b.yaml").write_text("{}\n")
    assert _bash_complete(script, ["poc", "report", "res"], cwd=tmp_path) == ["results-a"]
    assert _bash_complete(script, ["poc", "run", "--results", "res"], cwd=tmp_path) == ["results-a"]
    assert set(_bash_complete(script, ["poc", "validate", "--config", "res"], cwd=tmp_path)) == {
        "results-a", "results-b.yaml"}


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed (scripts/setup.sh installs it)")
def test_zsh_loads_the_script_and_registers_poc(capsys, tmp_path):
    script = _script("zsh", capsys)
    (tmp_path / "_poc").write_text(script)
    assert subprocess.run(["zsh", "-n", tmp_path / "_poc"], capture_output=True, check=False).returncode == 0
    res = subprocess.run(["zsh", "-f", "-c", f'autoload -Uz compinit && compinit -u -d {tmp_path}/dump && '
                          f'eval "$(cat {tmp_path}/_poc)" && print -r -- $_comps[poc]'],
                         capture_output=True, text=True, check=False, timeout=60)
    assert res.returncode == 0 and res.stdout.strip() == "_shtab_poc", res


@pytest.mark.skipif(shutil.which("tcsh") is None, reason="tcsh is not installed (scripts/setup.sh installs it)")
def test_tcsh_loads_the_script_with_every_command(capsys, tmp_path):
    (tmp_path / "poc.csh").write_text(_script("tcsh", capsys))
    res = subprocess.run(["tcsh", "-f", "-c", f"source {tmp_path}/poc.csh; complete poc"],
                         capture_output=True, text=True, check=False, timeout=60)
    assert res.returncode == 0, res
    first = re.search(r"'p/1/\(([^)]*)\)/'", res.stdout)
    assert first and sorted(first.group(1).split()) == COMMANDS_TOP, res.stdout


def test_an_unknown_shell_is_refused(capsys):
    with pytest.raises(SystemExit) as ei:
        main(["completion", "fish"])
    assert ei.value.code == 2
    assert "invalid choice: 'fish'" in capsys.readouterr().err
