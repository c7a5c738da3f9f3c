"""A running job's output so far, read where the job writes it, for `poc logs` on a run in flight:
the store keeps a run's output only once the run is collected, and a user watching a campaign in
another terminal wants it now.

Slurm: the batch output file (render/sbatch.py: --output=<run_dir>/slurm-%j.out), read through the
backend's files channel (ssh to the login node, the local cluster's login container, or the mount
with slurmrestd), the same way the run's collect reads it at the end. Kubernetes: each pod of the
run's JobSet (its jobset-name label, and its jobset-uid once the handle knows the uid), the worker
container's log through the API server, as `kubectl logs` reads it. Local: the agents' log files in
the run's work directory (host processes), or `docker logs` of the run's containers (the container
runtime), on this machine.

Nothing here changes the job or the store: only files are read, and the backend is closed after.
"""
from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from ..errors import PocError

MAX_BYTES = 200_000          # as much of each file as the store keeps of a finished run's output


class LiveReadError(PocError):
    """The job's output could not be read where it is (the cluster did not answer, a path is unknown)."""


def readable(handle: dict) -> bool:
    """Whether this module can read the output of the job `handle` names."""
    data = handle.get("data") or {}
    if handle.get("platform") == "slurm":
        return bool(data.get("run_dir") and data.get("job_id"))
    if handle.get("platform") == "k8s":
        return bool(data.get("namespace") and data.get("name"))
    if handle.get("platform") == "local":
        if data.get("runtime") == "container":
            return bool(data.get("containers"))
        return data.get("runtime", "host") == "host" and bool(data.get("work_dir"))
    return False


def read(handle: dict, make_backend: Callable[[str], object], run=subprocess.run) -> dict[str, str]:
    """{name: text} of the job's output so far, named as the store names it when the run is collected
    (slurm.out; <pod>.log; agent-N.log; container-N.log); {} when the job has written nothing yet.
    run: runs `docker logs` for the local container runtime (tests pass a recording one)."""
    data = handle.get("data") or {}
    if handle.get("platform") == "local":
        if data.get("runtime") == "container":
            return _container_logs(data["containers"], run)
        work = Path(data["work_dir"])
        return {p.name: _tail_file(p) for p in sorted(work.glob("agent-*.log")) if p.is_file()}
    if handle.get("platform") == "k8s":
        return _pod_logs(data, make_backend("k8s"))
    from ..backends.slurm.userview import output_name

    path = f"{str(data['run_dir']).rstrip('/')}/{output_name(str(data['job_id']))}"
    backend = make_backend("slurm")
    try:
        # tail exits 1 when the file is not there yet (the job has not started): nothing written
        res = backend.t.run(["tail", "-c", str(MAX_BYTES), "--", path], timeout=60, check=False)
    except PocError as exc:
        raise LiveReadError(f"the output of job {data['job_id']} ({path}) could not be read: {exc.message}",
                            tip=exc.tip or "check that the Slurm login node answers (`poc check`)") from None
    finally:
        backend.close()
    return {"slurm.out": res.stdout} if res.returncode == 0 and res.stdout else {}


def _pod_logs(data: dict, backend) -> dict[str, str]:
    """The worker container's log of each pod of the run's JobSet; a pod whose container has not started
    (the API server answers 400) or is gone (404) has nothing to show yet."""
    from kubernetes.client.rest import ApiException

    from ..render.jobset import CONTAINER, JOBSET_NAME_LABEL

    ns, name, uid = data["namespace"], data["name"], data.get("uid")
    where = f"the pods of JobSet {ns}/{name}"
    c = backend.client
    out: dict[str, str] = {}
    try:
        pods = [c.to_dict(p) for p in c.call("LIST pods", c.core().list_namespaced_pod, ns,
                                             label_selector=f"{JOBSET_NAME_LABEL}={name}").items]
        for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
            labels = pod["metadata"].get("labels") or {}
            if uid and labels.get("jobset.sigs.k8s.io/jobset-uid", uid) != uid:
                continue   # a JobSet of the same name made since: not this run's
            try:
                text = c.core().read_namespaced_pod_log(pod["metadata"]["name"], ns, container=CONTAINER,
                                                        limit_bytes=MAX_BYTES, _request_timeout=30)
            except ApiException as exc:
                if exc.status in (400, 404):
                    continue
                raise LiveReadError(f"the log of pod {ns}/{pod['metadata']['name']} could not be read: "
                                    f"HTTP {exc.status} {exc.reason}",
                                    tip="your rights need pods/log get in that namespace (`poc check`)") from None
            if text:
                out[f"{pod['metadata']['name']}.log"] = str(text)
    except PocError as exc:
        if isinstance(exc, LiveReadError):
            raise
        raise LiveReadError(f"{where} could not be listed: {exc.message}",
                            tip=exc.tip or "check that the API server answers (`poc check`)") from None
    finally:
        backend.close()
    return out


def _container_logs(names: list[str], run) -> dict[str, str]:
    """`docker logs` of each of the run's containers; one not created yet has nothing to show."""
    out = {}
    for i, name in enumerate(names):
        try:
            res = run(["docker", "logs", name], capture_output=True, text=True, errors="replace", timeout=60,
                      check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise LiveReadError(f"docker logs {name} failed: {exc}",
                                tip="is the Docker engine running on this machine?") from None
        if res.returncode == 0 and (res.stdout or res.stderr):
            out[f"container-{i}.log"] = (res.stdout + res.stderr)[-MAX_BYTES:]
    return out


def _tail_file(p: Path) -> str:
    with open(p, "rb") as fh:
        size = fh.seek(0, 2)
        fh.seek(max(0, size - MAX_BYTES))
        return fh.read().decode("utf-8", errors="replace")
