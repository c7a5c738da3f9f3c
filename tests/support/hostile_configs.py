"""A corpus of hostile configs, generated from the tables below, and how a rendering of one is judged.

Each case is what a co-user could hand someone as "our team's config": injection strings in every
string field the config model has, huge, negative, NaN and infinite numbers in every numeric one,
deep and aliased YAML, wrong types, unknown keys, reserved labels and annotations, the security-
relevant choices config/review.py must say, binary junk, duplicate keys and giant files.

Every case ends as one of four (benchmarks/hostile_configs.py counts them; a unit test runs a subset):
  refused          poc validate and both renders exit non-zero with an ERROR line (and TIP)
  rendered safely  something rendered, and nothing injected: the sbatch script passes `bash -n`, its
                   #SBATCH lines are options the harness or the allow-list write, and run with every
                   command stubbed (as nobody, no PATH) the canary command never runs; the Kubernetes
                   YAML parses into the objects the harness makes, no key holds the canary, and the
                   containers' `sh -c` scripts pass the same canary run
  traceback        "Traceback" on stderr (or an exception out of the in-process command)
  unsafe           rendered with the injection in effect
"""
from __future__ import annotations

import math
import os
import random
import re
import shutil
import subprocess
import tempfile
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import UnionType

import yaml
from pydantic import BaseModel

from harness.config import Config
from harness.config.sbatch import ALLOWED, OWN_KEY

CANARY = "pocpwn"
# each lands where a shell, a YAML emitter or an #SBATCH line might take it for more than a value
PAYLOADS = [f"x$({CANARY})", f"x`{CANARY}`", f"x;{CANARY}", f"x\n{CANARY}", f"x' ; {CANARY} ; '",
            f'x" ; {CANARY} ; "', f"x&&{CANARY}&&", f"x|{CANARY}", f"${{IFS}}{CANARY}", f"--x=$({CANARY})",
            f"x\n#SBATCH --uid=0\n{CANARY}", f"x\n{CANARY}_key: 1", f"x\r\n{CANARY}", f"x\u2028{CANARY}",
            f"x\x1b]0;{CANARY}\x07", f"'\"$({CANARY})`{CANARY}`", f"a b {CANARY}", f"x)\n{CANARY}\n(", "*",
            "../../../etc/passwd", f"-{CANARY}", f"x\x00{CANARY}", f"{{{{ {CANARY} }}}}", f"%(x)s{CANARY}%n%s"]
NUMBERS = [-1, 10**30, 1.0e30, math.inf, -math.inf, math.nan, 2**63, -(2**63) - 1, 99_999_999_999, "1e3", True, 0]
# where a field's value only reaches a renderer with another field set
CONTEXT = {
    "slurm.container_image": {"slurm": {"container": "pyxis"}},
    "slurm.rest.": {"slurm": {"transport": "rest", "rest": {"url": "https://r.example:6820"}}},
    "calibration.": {"calibration": {"enabled": True}},
    "kubernetes.checkpoint_pvc": {"platforms": ["k8s"]},
}


@dataclass(frozen=True)
class Case:
    name: str
    kind: str
    text: bytes | None = None                       # the file's bytes
    make: Callable[[Path], None] | None = None      # or writes the file itself (the giant ones)

    def write(self, path: Path) -> Path:
        if self.make is not None:
            self.make(path)
        else:
            path.write_bytes(self.text or b"")
        return path


def _dump(data: dict) -> bytes:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode()


def _nested(path: str, value) -> dict:
    keys = path.split(".")
    out: dict = {keys[-1]: value}
    for k in reversed(keys[:-1]):
        out = {k: out}
    return out


def _merge(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _with_context(path: str, data: dict) -> dict:
    for prefix, ctx in CONTEXT.items():
        if path == prefix or (prefix.endswith(".") and path.startswith(prefix)):
            data = _merge(ctx, data)
    return data


def fields(model: type[BaseModel] = Config, prefix: str = "") -> list[tuple[str, object]]:
    """(dotted path, type) of every leaf field of the config model, sub-models walked."""
    out = []
    for name, f in model.model_fields.items():
        args = typing.get_args(f.annotation)
        optional = typing.get_origin(f.annotation) in (typing.Union, UnionType)
        plain = [a for a in args if a is not type(None)] if optional else [f.annotation]
        t = plain[0] if len(plain) == 1 else f.annotation
        if isinstance(t, type) and issubclass(t, BaseModel):
            out += fields(t, f"{prefix}{name}.")
        else:
            out.append((f"{prefix}{name}", t))
    return out


def _injections() -> list[Case]:
    cases, i = [], 0
    for path, t in fields():
        origin = typing.get_origin(t)
        text = t is str or t in (list, dict) or origin in (typing.Literal, list, dict)
        if not text or path in ("pricing", "faults", "scale.nodes"):   # numbers and sub-models: other tables
            continue
        # every string field gets a payload (rotating through the list), a mapping two (in a key, in a
        # value); the fields whose text reaches the sbatch script or the pods as written get half of them
        free = path in ("fabric.env", "kubernetes.pod.annotations", "slurm.extra_sbatch", "campaign",
                        "slurm.partition", "calibration.nccl_tests_args")
        mapping = origin is dict or t is dict
        chosen = PAYLOADS[i % 2::2] if free else [PAYLOADS[(i + k * 7) % len(PAYLOADS)] for k in range(1 + mapping)]
        i += 1
        for j, p in enumerate(chosen):
            if origin is list or t is list:
                value: object = [p]
            elif origin is dict or t is dict:
                value = {"NCCL_X" if path == "fabric.env" else "team.example.com/x": p} if j % 2 == 0 else {p: "x"}
                if path == "kubernetes.pod.tolerations":
                    value = [{"key": p, "operator": "Exists"}]
                elif path == "kubernetes.pod.affinity":
                    value = {"nodeAffinity": {"x": p}}
                elif path == "ux.kubernetes":
                    value = {"namespace": p} if j % 2 == 0 else {"pod": {"annotations": {"a.example/x": p}}}
                elif path == "drills.commands":
                    value = {"slurm": {"restart": [{"component": p, "argv": ["true", p]}]}}
            else:
                value = p
            data = _with_context(path, {"platforms": ["local", "slurm", "k8s"], **_nested(path, value)})
            cases.append(Case(f"inject {path} #{j}", "injection", _dump(data)))
    return cases


def _numbers() -> list[Case]:
    cases = []
    full = {"workload.steps", "pricing.k8s.usd_per_hour", "timeouts.run_s"}
    paths = [p for p, t in fields() if t in (int, float)] + ["pricing.k8s.usd_per_hour", "pricing.slurm.sets.spot",
                                                              "faults.0.at_step", "scale.nodes.0"]
    for i, path in enumerate(paths):
        chosen = NUMBERS if path in full else [NUMBERS[i % len(NUMBERS)]]
        for n in chosen:
            keys = path.split(".")
            if keys[0] == "faults":
                data = {"faults": [{"kind": "kill_rank", "at_step": n}]}
            elif keys[0] == "scale":
                data = {"scale": {"nodes": [n]}}
            else:
                data = _nested(path, n)
            cases.append(Case(f"number {path}={n!r}", "number", _dump(_with_context(path, data))))
    return cases


def _laughs() -> bytes:
    lines = ["kubernetes:", "  pod:", "    affinity:", '      a0: &a0 [' + ",".join(['"lol"'] * 8) + "]"]
    lines += [f"      a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    return ("\n".join(lines) + "\n").encode()


def _yaml_shapes() -> list[Case]:
    head = "kubernetes:\n  pod:\n    affinity:\n"
    s = [("billion laughs", _laughs()),
         ("3000-deep flow", (head + "      x: " + "[" * 3000 + "]" * 3000 + "\n").encode()),
         ("600-deep indent", (head + "".join(" " * (6 + 2 * i) + f"k{i}:\n" for i in range(600))
                              + " " * 1206 + "v: 1\n").encode()),
         ("recursive anchor", b"a: &a\n  b: *a\n"),
         ("alias chain 100 deep", ("a: &a [x]\n" + "".join(f"b{i}: &b{i} [*{'a' if i == 0 else f'b{i - 1}'}]\n"
                                                            for i in range(100))).encode()),
         ("aliases within limits", b"slurm:\n  gres: &g [nvme:1]\nkubernetes:\n  pod:\n"
                                   b"    node_selector: &s {pool: gpu}\n"),
         ("python tag", f"campaign: !!python/object/apply:os.system ['{CANARY}']\n".encode()),
         ("binary tag", b"campaign: !!binary aGVsbG8=\n"),
         ("set tag", b"platforms: !!set {k8s: null}\n"),
         ("two documents", b"campaign: a\n---\ncampaign: b\n"),
         ("empty file", b""),
         ("only comments", b"# nothing\n# here\n"),
         ("top-level list", b"- campaign: a\n"),
         ("top-level scalar", b"just text\n"),
         ("long key", ("x" * 100_000 + ": 1\n").encode()),
         ("long value", ("campaign: " + "a" * 900_000 + "\n").encode()),
         ("bidi override in campaign", "campaign: \u202eabc\n".encode()),
         ("tab indentation", b"workload:\n\tsteps: 3\n"),
         ("unclosed flow", b"platforms: [slurm, k8s\n"),
         ("merge of a scalar", b"workload:\n  <<: 5\n")]
    return [Case(n, "yaml", t) for n, t in s]


def _wrong_types() -> list[Case]:
    values = ["x", [1, 2], 5, None, True, {"a": 1}]
    sections = [n for n in Config.model_fields]
    cases = [Case(f"wrong type {sec}={values[i % len(values)]!r}", "wrong type",
                  _dump({sec: values[i % len(values)]})) for i, sec in enumerate(sections)]
    more = {"platforms": "k8s", "faults": {"kind": "kill_rank"}, "pricing": [1], "slurm.extra_sbatch": "--exclusive",
            "kubernetes.pod.tolerations": "x", "kubernetes.pod.tolerations.x": 1, "kubernetes.pod.affinity": [1],
            "ux.kubernetes": [1], "drills.commands": "x", "scale.nodes": "2,4", "fabric.env": ["A=1"],
            "workload.steps": "ten", "kubernetes.pod.labels": {"a": {"b": 1}}, "slurm.rest.job_environment": [1]}
    for path, v in more.items():
        cases.append(Case(f"wrong type {path}={v!r}", "wrong type", _dump(_nested(path, v))))
    cases.append(Case("toleration not a mapping", "wrong type", _dump({"kubernetes": {"pod": {"tolerations": [5]}}})))
    return cases


def _unknown_keys() -> list[Case]:
    cases = [Case("unknown top-level key", "unknown key", _dump({"evil": 1}))]
    for sec in ("workload", "resources", "kubernetes", "kubernetes.pod", "slurm", "slurm.rest", "local", "timeouts",
                "fabric", "ux", "drills", "serve", "calibration", "scale", "contention"):
        cases.append(Case(f"unknown key in {sec}", "unknown key", _dump(_nested(f"{sec}.no_such_key", 1))))
    cases.append(Case("unknown key in a fault", "unknown key",
                      _dump({"faults": [{"kind": "kill_rank", "at_step": 3, "evil": 1}]})))
    cases.append(Case("unknown key in a price", "unknown key", _dump({"pricing": {"k8s": {"evil": 1}}})))
    cases.append(Case("unknown toleration key", "unknown key",
                      _dump({"kubernetes": {"pod": {"tolerations": [{"key": "a", "evil": 1}]}}})))
    return cases


def _reserved() -> list[Case]:
    keys = ["poc/run-id", "poc/owner", "kueue.x-k8s.io/queue-name", "kueue.x-k8s.io/priority-class",
            "jobset.sigs.k8s.io/jobset-name", "batch.kubernetes.io/job-name", "job-name", "controller-uid",
            "kueue.x-k8s.io/podset-required-topology"]
    cases = []
    for k in keys:
        for where in ("labels", "annotations", "node_selector"):
            if where == "node_selector" and not k.startswith("poc/"):
                continue
            cases.append(Case(f"reserved {where} {k}", "reserved",
                              _dump({"platforms": ["k8s"], "kubernetes": {"pod": {where: {k: "x"}}}})))
    cases.append(Case("reserved label in ux.kubernetes", "reserved",
                      _dump({"ux": {"kubernetes": {"pod": {"labels": {"poc/run-id": "x"}}}}})))
    return cases


def _security_choices() -> list[Case]:
    choices = {
        "export LD_PRELOAD": {"slurm": {"extra_sbatch": ["--export=ALL,LD_PRELOAD=/tmp/x.so"]}},
        "export BASH_ENV and PATH": {"slurm": {"extra_sbatch": ["--export=BASH_ENV=/tmp/rc,PATH=/tmp/bin"]}},
        "export LD_LIBRARY_PATH": {"slurm": {"extra_sbatch": ["--export=LD_LIBRARY_PATH=/tmp"]}},
        "fabric LD_PRELOAD": {"fabric": {"env": {"LD_PRELOAD": "/tmp/x.so"}}},
        "keyless Exists toleration": {"kubernetes": {"pod": {"tolerations": [{"operator": "Exists"}]}}},
        "SYS_ADMIN": {"kubernetes": {"pod": {"capabilities": ["SYS_ADMIN"]}}},
        "ALL capabilities": {"kubernetes": {"pod": {"capabilities": ["ALL"]}}},
        "SYS_PTRACE and NET_ADMIN": {"kubernetes": {"pod": {"capabilities": ["SYS_PTRACE", "NET_ADMIN"]}}},
        "apparmor unconfined": {"kubernetes": {"pod": {"annotations": {
            "container.apparmor.security.beta.kubernetes.io/worker": "unconfined"}}}},
        "seccomp unconfined": {"kubernetes": {"pod": {"annotations": {
            "seccomp.security.alpha.kubernetes.io/pod": "unconfined"}}}},
        "host network": {"kubernetes": {"pod": {"host_network": True}}},
        "hostPath root": {"kubernetes": {"checkpoint_host_path": "/"}},
        "hostPath etc": {"kubernetes": {"checkpoint_host_path": "/etc"}},
        "system priority": {"kubernetes": {"pod": {"priority_class": "system-node-critical"}}},
        "probe SYS_ADMIN": {"ux": {"kubernetes": {"pod": {"capabilities": ["SYS_ADMIN"]}}}},
        "unknown ssh host": {"slurm": {"accept_unknown_host": True, "host": "login1"}},
        "plain-http JWT": {"slurm": {"transport": "rest", "rest": {"url": "http://127.0.0.1:6820",
                                                                   "allow_insecure_http": True}}},
        "drill commands": {"drills": {"commands": {"slurm": {"restart": [{"component": "c", "argv": ["true"]}]}}}},
        "privileged (no such key)": {"kubernetes": {"pod": {"privileged": True}}},
        "securityContext (no such key)": {"kubernetes": {"pod": {"security_context": {"runAsUser": 0}}}},
        "volumes (no such key)": {"kubernetes": {"pod": {"volumes": [{"hostPath": {"path": "/"}}]}}},
        "extra_sbatch --uid": {"slurm": {"extra_sbatch": ["--uid=0"]}},
        "extra_sbatch --wrap": {"slurm": {"extra_sbatch": [f"--wrap={CANARY}"]}},
        "service account": {"kubernetes": {"pod": {"service_account": "cluster-admin"}}},
    }
    return [Case(f"choice {n}", "security choice", _dump({"platforms": ["slurm", "k8s"], **d}))
            for n, d in choices.items()]


def _junk() -> list[Case]:
    rnd = random.Random(39)
    s = [("NUL byte", b"campaign: a\x00b\n"), ("invalid UTF-8", b"campaign: \xff\xfe\n"),
         ("PNG header", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00"), ("random bytes", rnd.randbytes(4096)),
         ("UTF-16 with BOM", "campaign: a\n".encode("utf-16")), ("bell and escape", b"campaign: a\x07\x1b[31m\n"),
         ("CESU surrogate", b"campaign: \xed\xa0\x80\n"), ("zip header", b"PK\x03\x04" + rnd.randbytes(64)),
         ("UTF-8 BOM then YAML", b"\xef\xbb\xbfcampaign: bom\n"), ("DEL and C1", "campaign: a\x7f\x85\x9b\n".encode()),
         ("gzip of a config", b"\x1f\x8b\x08\x00" + rnd.randbytes(40))]
    return [Case(n, "binary junk", t) for n, t in s]


def _duplicates() -> list[Case]:
    s = [("top-level", b"campaign: a\ncampaign: b\n"),
         ("in workload", b"workload:\n  steps: 3\n  steps: 99999\n"),
         ("flow mapping", b"kubernetes: {namespace: a, namespace: b}\n"),
         ("labels", b"kubernetes:\n  pod:\n    labels: {team: a, team: b}\n"),
         ("sections", b"slurm: {partition: a}\nslurm: {partition: b}\n"),
         ("true and True", b"workload:\n  simulated_gpus: true\nfabric:\n  env: {true: a, True: b}\n")]
    return [Case(f"duplicate {n}", "duplicate key", t) for n, t in s]


def _giant(size: int) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        with open(path, "w") as fh:
            fh.write("campaign: giant\nkubernetes:\n  pod:\n    labels:\n")
            line = "".join(f"      k{i}: v\n" for i in range(1000))
            while fh.tell() < size:
                fh.write(line)
    return make


def _giants() -> list[Case]:
    return [Case("giant 2 MB", "giant", make=_giant(2 * 2**20)), Case("giant 64 MB", "giant", make=_giant(64 * 2**20)),
            Case("giant comments 1.5 MB", "giant", ("# x\n" * 400_000 + "campaign: c\n").encode())]


def corpus() -> list[Case]:
    return (_injections() + _numbers() + _yaml_shapes() + _wrong_types() + _unknown_keys() + _reserved()
            + _security_choices() + _junk() + _duplicates() + _giants())


# ------------------------------------------------------------------ judging what rendered

_SBATCH_LINE = re.compile(r"#SBATCH (--[a-z][a-z0-9-]*)(=\S*)?")
HARNESS_SBATCH = {"--job-name", "--comment", "--nodes", "--ntasks-per-node", "--cpus-per-task", "--mem", "--time",
                  "--requeue", "--open-mode", "--signal", "--propagate", "--output", "--chdir", "--gpus-per-node",
                  "--partition", "--account", "--qos", "--reservation", "--constraint", "--gres", "--switches",
                  "--exclusive", "--container-image"}


_BASH = shutil.which("bash") or "/bin/bash"   # found with this process's PATH: the run below has none


def canary_fired(script: str, shell: str = "bash") -> bool:
    """Whether running `script` with every command stubbed ever runs the canary. No PATH: each external
    command reaches command_not_found_handle, which notes its name and succeeds; `module` is a stub too.
    As nobody when this runs as root, in an empty directory, for at most 10 s."""
    with tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o777)
        log, body = Path(d) / "ran.log", Path(d) / "script"
        body.write_text(script)
        os.chmod(body, 0o644)
        wrapper = ('command_not_found_handle() { printf "%s\\n" "$1" >> "$POC_CANARY_LOG"; return 0; }\n'
                   'module() { return 0; }\n. "$POC_CANARY_SCRIPT"\n')
        argv = [_BASH, "--noprofile", "--norc"] + (["--posix"] if shell == "sh" else []) + ["-c", wrapper]
        if os.geteuid() == 0:
            argv = [shutil.which("setpriv") or "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
        env = {"PATH": "/nonexistent", "HOME": d, "POC_CANARY_LOG": str(log), "POC_CANARY_SCRIPT": str(body),
               "SLURM_JOB_ID": "1", "SLURM_JOB_NODELIST": "n1", "SLURM_RESTART_COUNT": "0", "SLURM_NODEID": "0"}
        try:
            subprocess.run(argv, cwd=d, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=10, check=False)
        except subprocess.TimeoutExpired:
            pass
        ran = log.read_text() if log.exists() else ""
    return CANARY in ran


def sbatch_problems(text: str) -> list[str]:
    """What makes a rendered sbatch script unsafe: not bash, an #SBATCH line the harness or the allow-list
    would not write, or the canary run."""
    out = []
    r = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        out.append(f"bash -n: {r.stderr.strip()[:200]}")
    for line in text.splitlines():
        if line.startswith("#SBATCH"):
            m = _SBATCH_LINE.fullmatch(line)
            # one option with one value (sbatch splits a line at white space): a value is data, whatever it says
            if not m or (m.group(1) not in HARNESS_SBATCH and m.group(1) not in ALLOWED and m.group(1) not in OWN_KEY):
                out.append(f"#SBATCH line not the harness's: {line[:120]!r}")
        elif line.lstrip().startswith(CANARY):
            out.append(f"a line of its own starts with the canary (a value broke the line): {line[:120]!r}")
    if canary_fired(text):
        out.append("the canary command ran")
    return out


KINDS = {"Namespace", "ResourceFlavor", "ClusterQueue", "LocalQueue", "ServiceAccount", "Role", "RoleBinding",
         "ConfigMap", "JobSet", "ClusterRole", "ClusterRoleBinding"}


def k8s_problems(files: dict[str, str]) -> list[str]:
    """What makes rendered Kubernetes YAML unsafe: not YAML, an object the harness does not make, the canary
    as a key (an injected field), or a container's shell script running it."""
    out = []
    for name, text in files.items():
        try:
            docs = [d for d in yaml.safe_load_all(text) if d is not None]
        except yaml.YAMLError as exc:
            out.append(f"{name}: not YAML: {str(exc)[:120]}")
            continue
        for d in docs:
            if not isinstance(d, dict) or d.get("kind") not in KINDS or "apiVersion" not in d:
                out.append(f"{name}: an object the harness does not make: {str(d)[:120]!r}")
        stack: list[object] = list(docs)
        while stack:
            x = stack.pop()
            if isinstance(x, dict):
                out += [f"{name}: the canary as a key: {k[:80]!r}" for k in x if isinstance(k, str) and CANARY in k]
                for key in ("command", "args"):
                    seq = x.get(key)
                    if isinstance(seq, list):
                        for i, word in enumerate(seq[:-1]):
                            if word == "-c" and canary_fired(str(seq[i + 1]), "sh"):
                                out.append(f"{name}: a container's sh -c script runs the canary")
                stack.extend(x.values())
            elif isinstance(x, list):
                stack.extend(x)
    return out


def verdict(results: list[tuple[int, str]], problems: list[str], rendered: bool) -> str:
    """The case's class from (exit code, stderr) of validate and the two renders, and what was found wrong
    in what rendered."""
    if any("Traceback" in err for _, err in results):
        return "traceback"
    if problems:
        return "unsafe"
    if rendered:
        return "rendered safely"
    if all(rc != 0 and "ERROR" in err for rc, err in results):
        return "refused"
    return "traceback"   # exited without rendering and without an ERROR line: not a refusal a user can read
