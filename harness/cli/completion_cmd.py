"""`poc completion bash|zsh|tcsh`: a shell completion script generated from the parser `poc` itself parses
with (shtab reads the argparse tree), so every command and option it completes is one that exists."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator

SHELLS = ("bash", "zsh", "tcsh")
# Options and positionals that name a path: the shell offers files, or directories, for them.
FILE_DESTS = frozenset({"config", "log_file"})
DIR_DESTS = frozenset({"results", "results_dir", "out"})

INSTALL = """\
Print a shell completion script for poc's commands and options.

Install it once:
  bash: poc completion bash > ~/.local/share/bash-completion/completions/poc
        (or add `eval "$(poc completion bash)"` to ~/.bashrc)
  zsh:  poc completion zsh > ~/.zfunc/_poc
        (with `fpath=(~/.zfunc $fpath); autoload -Uz compinit; compinit` in ~/.zshrc)
  tcsh: poc completion tcsh > ~/.poc.completion.csh
        (and `source ~/.poc.completion.csh` in ~/.tcshrc)"""


def _actions(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    for action in parser._actions:
        yield action
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):   # an alias maps to the same parser
                yield from _actions(sub)


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    """The completion script of `parser` for `shell`; marks the path arguments on the way (shtab's
    `complete` attribute, which argparse ignores)."""
    import shtab

    for action in _actions(parser):
        if action.dest in FILE_DESTS:
            action.complete = shtab.FILE   # type: ignore[attr-defined]
        elif action.dest in DIR_DESTS:
            action.complete = shtab.DIRECTORY   # type: ignore[attr-defined]
    return shtab.complete(parser, shell=shell)


def cmd_completion(args, build_parser: Callable[[], argparse.ArgumentParser]) -> int:
    """build_parser: poc's parser, passed in by parser.py (which imports this module)."""
    text = script(build_parser(), args.shell)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0
