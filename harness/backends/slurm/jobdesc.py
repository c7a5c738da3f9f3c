"""A rendered batch script -> the job description slurmrestd's ``POST /slurm/<v>/job/submit`` takes.

slurmrestd (24.11) does not read ``#SBATCH`` lines: everything sbatch would take from them must be
in the JSON ``job`` object beside the script (tried on the local cluster: a script holding
``#SBATCH --job-name=x --nodes=2`` ran unnamed on one node). So the options are read back from the
script the renderer wrote (harness/render/sbatch.py), which keeps one source for both transports,
and mapped here onto the job_desc_msg fields of data_parser v0.0.40-v0.0.42 (the same names in
all three). An option without a mapping is refused with the option named, before anything is
submitted: a job that silently lost its ``--gres`` or ``--reservation`` would measure something else.

sbatch also sends the submitting shell's environment (``--export=ALL``); slurmrestd needs it given:
``environment`` (rest_env.py: slurm.rest.job_environment, or a login shell's PATH and locale; neither is a
refusal). The script exports what the run needs itself.
"""
from __future__ import annotations

import re
import shlex

from ...errors import ConfigError

_SHORT = {"-J": "--job-name", "-N": "--nodes", "-n": "--ntasks", "-c": "--cpus-per-task", "-t": "--time",
          "-p": "--partition", "-A": "--account", "-q": "--qos", "-o": "--output", "-e": "--error",
          "-D": "--chdir", "-C": "--constraint", "-G": "--gpus", "-x": "--exclude", "-w": "--nodelist"}
_FLAGS = {"--exclusive", "--requeue", "--no-requeue"}    # options that take no value
_STRING = {"--job-name": "name", "--comment": "comment", "--nodes": "nodes", "--partition": "partition",
           "--account": "account", "--qos": "qos", "--reservation": "reservation", "--constraint": "constraints",
           "--output": "standard_output", "--error": "standard_error", "--chdir": "current_working_directory",
           "--exclude": "excluded_nodes", "--nodelist": "required_nodes"}
_INT = {"--ntasks": "tasks", "--ntasks-per-node": "tasks_per_node", "--cpus-per-task": "cpus_per_task"}
_MEM_UNITS = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


def _bad(opt: str, why: str) -> ConfigError:
    return ConfigError(f"slurm.transport rest: sbatch option {opt} {why}",
                       tip="remove it from slurm.extra_sbatch, or use slurm.transport ssh (sbatch reads it there)")


def sbatch_lines(script: str) -> list[str]:
    """The option words of the script's ``#SBATCH`` lines, as sbatch reads them: from the top, until
    the first line that is neither blank nor a comment."""
    words: list[str] = []
    for line in script.splitlines()[1:] if script.startswith("#!") else script.splitlines():
        s = line.strip()
        if s and not s.startswith("#"):
            break
        if s.startswith("#SBATCH"):
            words += shlex.split(s[len("#SBATCH"):], comments=True)
    return words


def _pairs(words: list[str]) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    i = 0
    while i < len(words):
        w = words[i]
        i += 1
        if not w.startswith("-"):
            raise _bad(repr(w), "is not an option")
        name, eq, value = w.partition("=")
        if not eq and w[:2] in _SHORT and len(w) > 2:     # -N2
            name, value, eq = w[:2], w[2:], "="
        name = _SHORT.get(name, name)
        if eq:
            out.append((name, value))
        elif name in _FLAGS:
            out.append((name, None))
        elif i < len(words):                                # --nodes 2
            out.append((name, words[i]))
            i += 1
        else:
            raise _bad(name, "has no value")
    return out


def seconds(text: str) -> int:
    """A Slurm time: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS -> seconds."""
    m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text.strip())
    if not m:
        raise _bad(f"--time={text}", "is not a Slurm time")
    d, a, b, c = (int(x) if x else None for x in m.groups())
    if d is not None:                       # D-HH[:MM[:SS]]
        secs = d * 86400 + a * 3600 + (b or 0) * 60 + (c or 0)
    elif c is not None:                     # HH:MM:SS
        secs = a * 3600 + b * 60 + c
    elif b is not None:                     # MM:SS
        secs = a * 60 + b
    else:                                   # MM
        secs = a * 60
    return secs


def minutes(text: str) -> int:
    """sbatch --time -> whole minutes, rounded up (job_desc_msg.time_limit is in minutes)."""
    return -(-seconds(text) // 60)


def _mb(opt: str, text: str) -> int:
    m = re.fullmatch(r"(\d+)([KMGT]?)B?", text.strip().upper())
    if not m:
        raise _bad(f"{opt}={text}", "is not a memory size")
    return max(1, round(int(m.group(1)) * _MEM_UNITS[m.group(2) or "M"]))


def _number(n: int) -> dict:
    return {"set": True, "infinite": False, "number": int(n)}


def job_description(script: str, run_dir: str, environment: tuple[str, ...] = ()) -> dict:
    """The ``job`` object for the submit request (the script goes in ``job.script``)."""
    job: dict = {"script": script, "current_working_directory": run_dir, "environment": list(environment)}
    tres: list[str] = []
    for opt, value in _pairs(sbatch_lines(script)):
        v = value or ""
        if opt in _STRING:
            job[_STRING[opt]] = v
        elif opt in _INT:
            if not v.isdigit():
                raise _bad(f"{opt}={v}", "needs a whole number")
            job[_INT[opt]] = int(v)
        elif opt == "--mem":
            job["memory_per_node"] = _number(_mb(opt, v))
        elif opt == "--mem-per-cpu":
            job["memory_per_cpu"] = _number(_mb(opt, v))
        elif opt == "--time":
            job["time_limit"] = _number(minutes(v))
        elif opt == "--gpus-per-node":
            tres.append(f"gres/gpu:{v}")
        elif opt == "--gres":
            tres += [f"gres/{g}" for g in v.split(",") if g]
        elif opt == "--gpus":
            job["tres_per_job"] = f"gres/gpu:{v}"
        elif opt == "--exclusive":
            job["shared"] = ["none"]
        elif opt in ("--requeue", "--no-requeue"):
            job["requeue"] = opt == "--requeue"
        elif opt == "--open-mode":
            if v.lower() not in ("append", "truncate"):
                raise _bad(f"{opt}={v}", "must be append or truncate")
            job["open_mode"] = [v.upper()]
        elif opt == "--signal":
            m = re.fullmatch(r"(B:)?(?:SIG)?([A-Z0-9]+)(?:@(\d+))?", v.upper())
            if not m:
                raise _bad(f"{opt}={v}", "is not [B:]SIGNAL[@seconds]")
            job["kill_warning_signal"] = m.group(2)
            job["kill_warning_delay"] = {"set": True, "infinite": False, "number": int(m.group(3) or 60)}
            if m.group(1):
                job["kill_warning_flags"] = ["BATCH_JOB"]
        elif opt == "--propagate":
            # sbatch propagates limits as SLURM_RLIMIT_* in the job's environment; a REST job's environment
            # is the one given here, which has none, so slurmd's own limits apply: NONE already
            if v.upper() != "NONE":
                raise _bad(f"{opt}={v}" if v else opt, "can only be NONE through slurmrestd: a REST job carries "
                           "no submitting shell's limits")
        elif opt == "--switches":
            count, _, wait = v.partition("@")
            if not count.isdigit():
                raise _bad(f"{opt}={v}", "is not N[@time]")
            job["required_switches"] = _number(int(count))
            if wait:
                job["wait_for_switch"] = seconds(wait)
        else:
            raise _bad(opt, "has no slurmrestd equivalent in this harness")
    if tres:
        job["tres_per_node"] = ",".join(tres)
    job.setdefault("current_working_directory", run_dir)
    return job
