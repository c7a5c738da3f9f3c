"""The slurm section (with slurm.rest): how the harness reaches the cluster and what the batch job asks for.

Every value that reaches the sbatch script or a command line is validated here: a plain word or path,
never something a shell would read as more than one argument.
"""
from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from .. import imageref
from . import sbatch
from .base import ENV_NAME, MAX_RESTARTS, Model

# none may start with '-': each also travels as an argument of scontrol, sinfo or sacctmgr, where it would
# be read as an option
_SLURM_WORD = re.compile(r"^(?!-)[A-Za-z0-9_.+:@%-]{1,128}$")
# a Slurm constraint expression: features joined by & | , with [ ] ( ) * and counts
_SLURM_CONSTRAINT = re.compile(r"^(?!-)[A-Za-z0-9_.&|,\[\]()*!:-]{1,256}$")
_SLURM_TIME = re.compile(r"(?:(\d{1,6})-)?(\d{1,9})(?::(\d{2}))?(?::(\d{2}))?")
# a job's time limit, and a --switches wait: Slurm takes larger ones, but a benchmark job of more than a
# year is a typing slip
MAX_TIME_S = 366 * 86400


def slurm_seconds(text: str) -> int | None:
    """A Slurm time (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS) in seconds; None if it is not one."""
    m = _SLURM_TIME.fullmatch(text)
    if not m:
        return None
    days, first, second, third = m.groups()
    if days is not None:   # D-HH[:MM[:SS]]
        if len(first) > 2:
            return None
        return int(days) * 86400 + int(first) * 3600 + int(second or 0) * 60 + int(third or 0)
    if third is not None:  # HH:MM:SS
        return None if len(first) > 2 else int(first) * 3600 + int(second) * 60 + int(third)
    return int(first) * 60 + int(second or 0)   # MM[:SS]


class SlurmRest(Model):
    """slurm.transport rest: slurmrestd's OpenAPI with a JWT (`scontrol token`), no shell for the scheduler."""
    url: str | None = None               # e.g. https://slurmrestd.example.org:6820; null: the local Docker cluster's
    api_version: str | None = None       # e.g. v0.0.41; null: the newest the server and the harness both speak
    token_env: str = "SLURM_JWT"         # the environment variable that holds the token
    token_file: str | None = None        # or a file holding it (read at start, never stored)
    user: str | None = None              # X-SLURM-USER-NAME; null: slurm.user
    files: Literal["ssh", "mount"] = "ssh"   # how the run directory is reached: the ssh settings, or a mount here
    mount: str | None = None             # with files: mount, where slurm.workdir is mounted on this machine
    ca_file: str | None = None           # a PEM bundle that signs slurmrestd's certificate; null: the system's
    # the JWT travels in every request's headers: a plain http:// url is refused unless this says so
    allow_insecure_http: bool = False
    # the environment every job starts with (sbatch would send the login shell's; slurmrestd sends only
    # this): {NAME: VALUE} or [NAME=VALUE], PATH included. null: PATH and locale read from a login
    # shell over ssh at preflight, else a fixed default; the run records which
    job_environment: dict[str, str] | None = None

    @field_validator("url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"https?://[A-Za-z0-9.\-\[\]:]+(/[A-Za-z0-9._~/-]*)?", v):
            raise ValueError("must be an http(s) URL like https://slurmrestd.example.org:6820")
        return v

    @field_validator("api_version")
    @classmethod
    def _ver(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"v\d+\.\d+\.\d+", v):
            raise ValueError("must look like v0.0.41")
        return v

    @field_validator("token_env")
    @classmethod
    def _token_env(cls, v: str) -> str:
        if not ENV_NAME.match(v):
            raise ValueError("must be an environment variable name")
        return v

    @field_validator("job_environment", mode="before")
    @classmethod
    def _env_pairs(cls, v: object) -> object:
        """[NAME=VALUE, ...] as {NAME: VALUE}; a whole number as its text (YAML reads 4 as a number)."""
        if isinstance(v, list):
            out: dict[str, object] = {}
            for item in v:
                name, eq, value = item.partition("=") if isinstance(item, str) else ("", "", "")
                if not eq:
                    raise ValueError(f"{item!r} is not NAME=VALUE")
                if name in out:
                    raise ValueError(f"{name} is given twice")
                out[name] = value
            v = out
        if isinstance(v, dict):
            v = {k: str(x) if isinstance(x, int) and not isinstance(x, bool) else x for k, x in v.items()}
        return v

    @field_validator("job_environment")
    @classmethod
    def _env(cls, v: dict[str, str] | None) -> dict[str, str] | None:
        if v is None:
            return v
        for name, value in v.items():
            if not ENV_NAME.match(name):
                raise ValueError(f"{name!r} is not a variable name (letters, digits and _, not starting with a digit)")
            if any(c in value for c in "\n\r\0"):
                raise ValueError(f"{name}'s value spans lines or holds a NUL byte")
        if not v.get("PATH"):
            raise ValueError("must set PATH: it is the job's whole environment, and the batch script runs srun "
                             "and scontrol by name (e.g. PATH: /opt/slurm/bin:/usr/local/bin:/usr/bin:/bin)")
        return v

    @model_validator(mode="after")
    def _mount(self) -> SlurmRest:
        if self.files == "mount" and not self.mount:
            raise ValueError("files: mount needs slurm.rest.mount (where slurm.workdir is mounted here)")
        return self

    @model_validator(mode="after")
    def _tls(self) -> SlurmRest:
        if self.url and self.url.startswith("http://") and not self.allow_insecure_http:
            raise ValueError(f"url {self.url} is plain http: the JWT would cross the network readable by anyone "
                             "on the path; use https:// (with slurm.rest.ca_file for a private CA), or set "
                             "slurm.rest.allow_insecure_http: true for a slurmrestd only this machine reaches")
        if self.ca_file and self.url and self.url.startswith("http://"):
            raise ValueError("ca_file is for an https:// url; this url is plain http")
        return self


# pyslurm links against libslurm and must match the cluster's Slurm release exactly; PyPI has 25.11 only and
# this project's Slurm is 24.11, so a pyslurm transport could not be tested here and is refused by name.
PYSLURM_REFUSED = ("pyslurm is not supported: it must match the cluster's Slurm release exactly, and PyPI has "
                   "pyslurm 25.11 only while this project is tested against Slurm 24.11")


class Slurm(Model):
    transport: Literal["local", "ssh", "rest"] = "ssh"
    connection_file: str | None = None
    host: str | None = None
    port: int = Field(22, ge=1, le=65535)
    user: str | None = None
    key_file: str | None = None
    known_hosts: str | None = None
    accept_unknown_host: bool = False
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time_limit: str = "00:15:00"
    workdir: str = "/shared/poc"
    python: str = "python3"
    container: Literal["none", "pyxis", "apptainer"] = "none"
    container_image: str | None = None
    max_restarts: int = Field(3, ge=0, le=MAX_RESTARTS)
    extra_sbatch: list[str] = Field(default_factory=list)
    reservation: str | None = None
    constraint: str | None = None        # --constraint, a feature expression like "a100&ib"
    gpu_type: str | None = None          # --gpus-per-node=TYPE:N, as in the cluster's gres.conf
    gres: list[str] = Field(default_factory=list)       # more generic resources, e.g. nvme:1
    switches: str | None = None          # --switches=N[@max-wait], e.g. "1@00:10:00"
    modules: list[str] = Field(default_factory=list)    # `module load`, in order, before torchrun
    venv: str | None = None              # a virtualenv on the cluster, activated before torchrun
    setup_script: str | None = None      # a bash file on the cluster, sourced before torchrun
    # where checkpoints go (a parallel file system, say); null: the run directory's ckpt/
    checkpoint_dir: str | None = None
    # slurmctld's log, read through the transport when this user may (docs/audit.md); null: the local
    # Slurm-in-Docker's own log on the project's cluster, else none
    controller_log: str | None = None
    # read when it exists: Host alias, HostName, User, Port, IdentityFile, ProxyJump
    ssh_config: str | None = "~/.ssh/config"
    proxy_jump: str | None = None        # [user@]host[:port][,...], as ssh -J
    rest: SlurmRest = Field(default_factory=SlurmRest)

    @field_validator("transport", mode="before")
    @classmethod
    def _no_pyslurm(cls, v: object) -> object:
        if isinstance(v, str) and v.strip().lower() == "pyslurm":
            raise PydanticCustomError("pyslurm_transport", PYSLURM_REFUSED)
        return v

    @field_validator("reservation", "gpu_type")
    @classmethod
    def _word(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"(?!-)[A-Za-z0-9_.+-]{1,128}", v):
            raise ValueError("may hold letters, digits and _ . + - only, and not start with -")
        return v

    @field_validator("constraint")
    @classmethod
    def _constraint(cls, v: str | None) -> str | None:
        if v is not None and not _SLURM_CONSTRAINT.match(v):
            raise ValueError("must be a Slurm feature expression (letters, digits, _ . & | , [ ] ( ) * ! : -)")
        return v

    @field_validator("gres")
    @classmethod
    def _words(cls, v: list[str]) -> list[str]:
        for item in v:
            if not _SLURM_WORD.match(item):
                raise ValueError(f"{item!r} may hold letters, digits and _ . + : @ % - only")
        return v

    @field_validator("modules")
    @classmethod
    def _modules(cls, v: list[str]) -> list[str]:
        for item in v:   # module names are NAME/VERSION; a leading '-' would be an option of `module load`
            if not re.fullmatch(r"[A-Za-z0-9_.+:@%][A-Za-z0-9_.+:@%/-]{0,127}", item):
                raise ValueError(f"{item!r} must be a module name like cuda/12.4 (letters, digits, _ . + : @ % / -, "
                                 "not starting with -)")
        return v

    @field_validator("switches")
    @classmethod
    def _switches(cls, v: str | None) -> str | None:
        m = None if v is None else re.fullmatch(r"(\d{1,4})(?:@(.+))?", str(v))
        wait = None if m is None or m.group(2) is None else slurm_seconds(m.group(2))
        if v is not None and (m is None or int(m.group(1)) > 4096 or (m.group(2) is not None and
                                                                    (wait is None or wait > MAX_TIME_S))):
            raise ValueError("must be a count (at most 4096), optionally with a maximum wait of at most a year: "
                             "1 or 1@00:10:00")
        return None if v is None else str(v)

    @field_validator("venv", "setup_script", "checkpoint_dir", "controller_log")
    @classmethod
    def _cluster_path(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"(?!-)[A-Za-z0-9_./~+-]{1,1024}", v):
            raise ValueError("must be a plain path (letters, digits, _ . / ~ + -, not starting with -)")
        return v

    @field_validator("proxy_jump")
    @classmethod
    def _jump(cls, v: str | None) -> str | None:
        hop = r"([A-Za-z0-9._-]+@)?[A-Za-z0-9][A-Za-z0-9.-]*(:\d{1,5})?"
        if v is not None and not re.fullmatch(rf"{hop}(,{hop})*", v):
            raise ValueError("must be [user@]host[:port], or several joined by ',' (jumped in order), as ssh -J")
        return v

    @field_validator("partition", "account", "qos")
    @classmethod
    def _ident(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"(?!-)[A-Za-z0-9_.+-]{1,64}", v):
            raise ValueError("may hold letters, digits and _ . + - only, and not start with -")
        return v

    @field_validator("time_limit")
    @classmethod
    def _time(cls, v: str) -> str:
        secs = slurm_seconds(v)
        if secs is None or secs > MAX_TIME_S:
            raise ValueError("must be a Slurm time like 00:15:00, 90 or 1-00:00:00, at most 366 days")
        return v

    @field_validator("workdir", "python")
    @classmethod
    def _path(cls, v: str) -> str:
        if not re.fullmatch(r"(?!-)[A-Za-z0-9_./~+-]{1,1024}", v):
            raise ValueError("must be a plain path (letters, digits, _ . / ~ + -, not starting with -)")
        return v

    @field_validator("extra_sbatch")
    @classmethod
    def _extra(cls, v: list[str]) -> list[str]:
        for item in v:
            why = sbatch.problem(item)
            if why:
                raise ValueError(why)
        return v

    @field_validator("container_image")
    @classmethod
    def _container_image(cls, v: str | None, info: ValidationInfo) -> str | None:
        problem = imageref.slurm_image_problem(info.data.get("container", "none"), v)
        if problem:
            raise PydanticCustomError("slurm_image", "{value} {problem}", {"value": repr(v), "problem": problem})
        return v

    @model_validator(mode="after")
    def _container(self) -> Slurm:
        if self.container != "none" and not self.container_image:
            raise ValueError(f"container {self.container!r} needs slurm.container_image")
        return self
