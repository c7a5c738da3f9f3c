"""The native cluster's processes: start a component detached in its own cgroup, tell whether it
still runs, wait for a condition while watching that the components it needs stay alive, and the
small HTTP(S)/kubectl probes those conditions use.
"""
from __future__ import annotations

import os
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from harness.clusters.k8s import builds, host, pki
from harness.clusters.k8s.layout import CGROUP_PARENT, Layout, load_state, save_state
from harness.errors import ClusterError, CommandError


def component_env() -> dict[str, str]:
    """This process's environment without proxies: every component talks to 127.0.0.1 and 10.x."""
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env["NO_PROXY"] = "127.0.0.1,localhost,10.0.0.0/8"
    env["PATH"] = env.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
    return env


def spawn(L: Layout, state: dict, name: str, argv: list[str], extra_env: dict | None = None,
          cgroup: str | None = None) -> int:
    """Start a component detached (own session, own cgroup, logging to logs/<name>.log) and record its pid.

    A plain fork+exec rather than subprocess.Popen: the component outlives this call (and this
    Python process), so there is no Popen object to keep; `down` stops it by pid.
    """
    L.logs.mkdir(parents=True, exist_ok=True)
    cg = f"{CGROUP_PARENT}/{cgroup or name}"
    host.make_cgroup(cg)
    procs_files = [str(h / cg / "cgroup.procs") for h in host.hierarchies()]
    env = component_env() | (extra_env or {})
    log_path = str(L.log(name))
    with open(log_path, "ab") as log:
        log.write(f"\n==== {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {' '.join(argv)}\n".encode())
    r, w = os.pipe()                      # close-on-exec: carries an exec failure back to us
    pid = os.fork()
    if pid == 0:                          # child: only os-level calls until exec
        try:
            os.close(r)
            os.setsid()
            for f in procs_files:
                try:
                    fd = os.open(f, os.O_WRONLY)
                    os.write(fd, str(os.getpid()).encode())
                    os.close(fd)
                except OSError:
                    pass
            devnull = os.open(os.devnull, os.O_RDONLY)
            out = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.dup2(devnull, 0)
            os.dup2(out, 1)
            os.dup2(out, 2)
            os.closerange(3, w)
            os.closerange(w + 1, 4096)
            os.execvpe(argv[0], argv, env)
        except BaseException as e:  # noqa: BLE001 - report anything, then leave without cleanup
            try:
                os.write(w, f"{type(e).__name__}: {e}".encode())
            finally:
                os._exit(127)
    os.close(w)
    with os.fdopen(r, "rb") as rf:
        err = rf.read()
    if err:
        os.waitpid(pid, 0)
        raise ClusterError(f"could not start {name} ({argv[0]}): {err.decode(errors='replace')}",
                           tip=f"if {argv[0]} is missing or broken, delete its directory; "
                               "`poc cluster up --k8s` builds what is missing")
    state["components"][name] = {"pid": pid, "exe": Path(argv[0]).name, "argv": argv, "log": log_path,
                                 "cgroup": cgroup or name, "extra_env": extra_env or {}}
    save_state(L, state)
    return pid


def alive(entry: dict) -> bool:
    """Whether the component of a state entry still runs (its pid, with the same executable)."""
    return host.pid_alive(entry["pid"], entry.get("exe"))


def log_tail(path: str | Path, lines: int = 15) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def wait(what: str, check: Callable[[], object], timeout: float, L: Layout | None = None,
         logs: tuple[str, ...] = (), interval: float = 0.5):
    """Poll check() until it returns something true; fail early when a component in `logs` dies."""
    deadline = time.monotonic() + timeout
    last_err = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except Exception as e:  # noqa: BLE001 - any failure means "not yet"
            last_err = e
        if L is not None:
            state = load_state(L)
            for name in logs:
                entry = state["components"].get(name)
                if entry and not alive(entry):
                    raise ClusterError(f"{name} exited while waiting for {what}:\n{log_tail(entry['log'])}",
                                       tip=f"see {entry['log']}; then `poc cluster down --k8s`")
        time.sleep(interval)
    detail = f" (last error: {last_err})" if last_err else ""
    hints = "; ".join(str(L.log(n)) for n in logs) if L else ""
    raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}{detail}",
                       tip=f"see {hints or 'the logs'}; then `poc cluster down --k8s`")


def https_get(url: str, cert: pki.CertPair | None = None, ca: Path | None = None,
              timeout: float = 3) -> tuple[int, str]:
    """(status, body) of a GET on a loopback HTTPS endpoint; unverified when no CA is given."""
    ctx = ssl.create_default_context(cafile=str(ca)) if ca else ssl._create_unverified_context()
    if cert:
        ctx.load_cert_chain(str(cert.cert), str(cert.key))
    try:
        with urllib.request.urlopen(url, context=ctx, timeout=timeout) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def http_get(url: str, timeout: float = 3) -> tuple[int, str]:
    """(status, body) of a GET on a loopback HTTP endpoint."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def kubectl(L: Layout, *args: str, input: str | None = None, check: bool = True, timeout: float = 60):
    """kubectl as the cluster admin (argv, no shell)."""
    argv = [str(builds.KUBERNETES.path("kubectl")), "--kubeconfig", str(L.admin_kubeconfig), *args]
    proc = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout, env=component_env(),
                          check=False)
    if check and proc.returncode != 0:
        raise CommandError(argv, proc.returncode, proc.stdout, proc.stderr)
    return proc
