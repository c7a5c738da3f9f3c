"""How the Slurm backend reaches the run directory: the "files" channel.

With ``slurm.transport: ssh`` or ``local`` the scheduler's commands and the file operations share one
transport. With ``rest`` (rest.py) the scheduler is slurmrestd and the files go separately:

* ``slurm.rest.files: ssh``: the usual ssh transport to a login node (slurm.host, or the local
  Docker cluster's login node). It also runs what slurmrestd 24.11 cannot: ``srun`` (kill_rank) and
  ``scontrol requeue``.
* ``slurm.rest.files: mount``: this machine sees ``slurm.workdir`` at ``slurm.rest.mount`` (NFS,
  sshfs, a bind mount). ``MountTransport`` runs the same commands locally, rewriting every argument
  that is a path under ``slurm.workdir`` to the local mount, so the rest of the backend keeps the
  cluster's paths (the job sees those).
"""
from __future__ import annotations

from ...config import Slurm
from ...errors import ConfigError
from ...transports import LocalTransport, SshTransport, Transport, make_transport


def ssh_transport(s: Slurm, settings: dict | None, accept_unknown_host: bool | None = None) -> Transport:
    """The ssh transport to slurm.host, else to the local Docker cluster's login node (``settings``)."""
    accept = s.accept_unknown_host if accept_unknown_host is None else accept_unknown_host
    if s.host:   # ~/.ssh/config and ProxyJump apply as for slurm.transport ssh
        return SshTransport.from_slurm(s.model_copy(update={"accept_unknown_host": accept}))
    if not settings:
        raise ConfigError("slurm.rest.files is ssh but no login node is configured and no local cluster was found",
                          tip="set slurm.host/user/key_file, or slurm.rest.files: mount with slurm.rest.mount")
    return make_transport("ssh", host=settings["host"], port=settings["port"], user=settings["user"],
                          key_file=settings["key_path"], known_hosts=settings["known_hosts_path"],
                          accept_unknown_host=accept)


class MountTransport:
    """A LocalTransport that maps paths under the cluster's ``workdir`` to ``mount`` on this machine."""
    name = "mount"

    def __init__(self, workdir: str, mount: str, local: LocalTransport | None = None):
        self.workdir = workdir.rstrip("/") or "/"
        self.mount = mount.rstrip("/") or "/"
        self.local = local or LocalTransport()

    def local_path(self, word: str) -> str:
        """``workdir`` or ``workdir/...`` -> the same under ``mount``; any other word as it is."""
        if word == self.workdir or word.startswith(self.workdir + "/"):
            return self.mount + word[len(self.workdir):]
        return word

    def run(self, argv, *, input=None, env=None, timeout=60, check=True):
        return self.local.run([self.local_path(str(a)) for a in argv], input=input, env=env,
                              timeout=timeout, check=check)

    def describe(self) -> dict:
        return {"transport": "mount", "workdir": self.workdir, "mount": self.mount}

    def close(self) -> None:
        pass


def files_transport(s: Slurm, settings: dict | None) -> tuple[Transport, Transport | None]:
    """(the files channel, the shell for srun/scontrol or None) for slurm.transport rest."""
    if s.rest.files == "mount":
        return MountTransport(s.workdir, s.rest.mount), None
    t = ssh_transport(s, settings)
    return t, t
