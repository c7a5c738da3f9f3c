"""The `poc` command (harness/cli/entry.py is the one place where known errors become `ERROR ...` /
`TIP ...`). Modules by concern: parser (every command's options), run (campaigns and their progress),
campaign_cmds (status, list, logs, cleanup, cancel), config_cmds (render, validate, config), results_cmds
(report, rederive), cluster_cmds, output (what is printed, and how), overrides (--set and POC_*)."""
from __future__ import annotations

from .entry import main
from .output import Out
from .output import record_line as _record_line
from .parser import build_parser
from .run import Interrupted

__all__ = ["Interrupted", "Out", "_record_line", "build_parser", "main"]
