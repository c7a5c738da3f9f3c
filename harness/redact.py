"""Secrets out of raw scheduler evidence before it is stored.

The raw evidence kept with every run (sacct/squeue JSON, JobSet, Workload, Pod and Event objects,
node objects, submit brackets) is whatever the schedulers returned, and any of it may carry a
credential: a kubeconfig user, a Secret's data, a token in an environment variable, a PEM key in a
job script, a bearer header in an event message. `scrub` walks any JSON-able value and replaces
each of these with "<redacted>", counting what it removed by rule, so the stored file says how much
was taken out and a reviewer can see that nothing a time-stamp depends on was.

Rules (a key is compared lower-cased with "-", "_" and "." removed):
- secret_key: a key that names a secret (token, password, secret, private key, client-key-data,
  authorization, ...) has its value replaced, whatever its type, unless the value is a bool or null
  (a flag such as automountServiceAccountToken) or the key names a reference (secretName,
  secretKeyRef: the name of a Secret, not its contents);
- env: an environment variable (a dict key in UPPER_CASE, a {"name", "value"} pair, or a
  NAME=value string or line) whose name contains TOKEN, SECRET, PASSW, KEY, CREDENTIAL or AUTH;
- pem, jwt, bearer: a string holding a PEM block (or its base64), a JWT (whatever its header's
  spacing), or "Bearer <token>" / "Basic <credentials>";
- auth_header: an Authorization (Cookie, X-Api-Key, ...) header's whole value, whatever its scheme;
- url_credentials, url_signature: a URL's user:password@ (or token@), and query parameters that
  sign or authorise it (X-Amz-Signature, sig, token, ...);
- argv: a command-line option that names a secret and its value, in a string (--token X,
  --password=X) or as the next element of a list (["--token", X]);
- registry_auth: a container registry's auths.<registry>.auth (base64 user:password);
- too_deep: a structure nested deeper than MAX_DEPTH (no scheduler writes one), whole;
- kubeconfig_user: a kubeconfig's users[].user (keys, certificates, tokens, exec plugins);
- secret_object: a Kubernetes Secret's data and stringData;
- managed_fields, last_applied: Kubernetes bookkeeping that copies whole objects, secrets included.

Bytes are read as UTF-8 text; a value that held a secret comes back as the redacted text. The walk
keeps its own stack, so no nesting depth raises RecursionError and loses the run it belongs to.
Scrubbing is idempotent: "<redacted>" is never counted again. An empty value ("", [], {}) holds nothing
and is kept as it is.

The same pass takes this machine out (harness/redact_machine.py): its absolute paths and host name become
placeholders ($HOME, $STATE_DIR, $HOST, ...), counted apart (Scrubbed.neutral), so every writer that stores
what a platform or a user gave gets secrets and machine out by one call. `scrub` is for structures,
`scrub_text` for a whole text (a log, a rendered file, events.jsonl): a PEM block there goes alone, not
the text around it, and a line that is JSON is scrubbed as a structure.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field

from . import redact_machine
from .redact_machine import NOWHERE, Machine
from .redact_text import (
    ARGV_FLAG,
    HEADER_NAMES,
    PASSWORD_P_TOOLS,
    PEM,
    PEM_BLOCK,
    REDACTED,
    norm_name,
    secret_name,
    text_rules,
)

MAX_DEPTH = 200   # far beyond any scheduler's objects, far below what json.dumps and readers can nest
__all__ = ["NOWHERE", "REDACTED", "Machine", "Scrubbed", "scrub", "scrub_text"]
NEUTRAL_RULES = (redact_machine.PATH_RULE, redact_machine.HOST_RULE)   # counted apart: not secrets

_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


@dataclass
class Scrubbed:
    data: object
    by_rule: Counter = field(default_factory=Counter)   # secrets removed, by rule
    neutral: Counter = field(default_factory=Counter)   # machine paths and host names made placeholders

    @property
    def removed(self) -> int:
        return sum(self.by_rule.values())

    def summary(self) -> dict:
        out = {"removed": self.removed, "by_rule": dict(sorted(self.by_rule.items()))}
        if self.neutral:
            out["placeholders"] = dict(sorted(self.neutral.items()))
        return out


def scrub(value: object, machine: Machine | None = None) -> Scrubbed:
    """A redacted deep copy of `value` (any JSON-able structure) and what was removed, by rule.
    machine: whose paths and host name become placeholders (None: this machine, redact_machine.here();
    redact_machine.NOWHERE: none, for what is shown to the user who typed it)."""
    counts: Counter = Counter()
    data = _walk(value, counts, redact_machine.here() if machine is None else machine)
    return _split(data, counts)


def scrub_text(text: str | bytes, machine: Machine | None = None) -> Scrubbed:
    """A whole text (a log, a rendered job, events.jsonl, a message) redacted: each key or certificate block
    replaced alone, each line that is a JSON object or array scrubbed as a structure, every other line by the
    text rules. Bytes are read as UTF-8 (bytes that are not are kept as they are) and come back as bytes."""
    counts: Counter = Counter()
    m = redact_machine.here() if machine is None else machine
    as_bytes = isinstance(text, (bytes, bytearray))
    s = bytes(text).decode("utf-8", errors="surrogateescape") if as_bytes else text
    s = PEM_BLOCK.sub(lambda mt: _redact(mt.group(0), "pem", counts), s)
    whole = _json_text(s, counts, m, pretty="\n" in s.strip()) if "\n" in s.strip() else None
    # line by line when it is not one JSON document: a JSON line is a structure, any other line text
    s = "".join(_string(line, counts, m) for line in s.splitlines(keepends=True)) if whole is None else whole
    return _split(s.encode("utf-8", errors="surrogateescape") if as_bytes else s, counts)


def _split(data: object, counts: Counter) -> Scrubbed:
    neutral = Counter({r: counts.pop(r) for r in NEUTRAL_RULES if r in counts})
    return Scrubbed(data, counts, neutral)


def _secret_key(key: str) -> bool:
    return secret_name(key)


def _env_name(name: str) -> bool:
    return secret_name(name) or secret_name(name.upper())


def _empty(value: object) -> bool:
    return isinstance(value, (str, bytes, list, tuple, dict)) and len(value) == 0


def _redact(value: object, rule: str, counts: Counter) -> object:
    """The replacement for a secret value; an already-redacted or empty value stays as it is, uncounted."""
    if value == REDACTED or _empty(value):
        return value
    counts[rule] += 1
    return REDACTED


def _walk(root: object, counts: Counter, machine: Machine) -> object:
    """The cleaned copy of root, built with an explicit stack: each item is a value, the container
    its copy goes into, the slot there, its depth, and whether it is a kubeconfig users[] entry."""
    top: list = [None]
    stack: list = [(root, top, 0, 0, False)]
    while stack:
        v, into, slot, depth, kube_user = stack.pop()
        if isinstance(v, (dict, list, tuple)) and depth > MAX_DEPTH:
            into[slot] = _redact(v, "too_deep", counts)
        elif kube_user and isinstance(v, dict) and "user" in v:
            # a kubeconfig users[] entry keeps its name; everything under `user` is a credential
            out: dict = {}
            into[slot] = out
            for k, x in v.items():
                if k == "user":
                    out[k] = _redact(x, "kubeconfig_user", counts)
                else:
                    out[k] = None
                    stack.append((x, out, k, depth + 1, False))
        elif isinstance(v, dict):
            into[slot] = _dict(v, depth, counts, stack, machine)
        elif isinstance(v, (list, tuple)):
            into[slot] = _list(v, depth, counts, stack, kube_user)
        elif isinstance(v, str):
            into[slot] = _string(v, counts, machine)
        elif isinstance(v, (bytes, bytearray)):
            text = bytes(v).decode("utf-8", errors="replace")
            before = sum(counts.values())
            cleaned = _string(text, counts, machine)
            into[slot] = v if sum(counts.values()) == before else cleaned
        else:
            into[slot] = v
    return top[0]


def _word(x: object) -> str | None:
    if isinstance(x, (bytes, bytearray)):
        return bytes(x).decode("utf-8", errors="replace")
    return x if isinstance(x, str) else None


def _list(v: list | tuple, depth: int, counts: Counter, stack: list, users: bool) -> list:
    out: list = [None] * len(v)
    first = _word(v[0]) if v else None
    tool = first.rsplit("/", 1)[-1] if first else ""
    # a command whose -p is its password (mysql -pX, sshpass -p X), or redis-cli -a X
    p_flags = ("-p",) if tool in PASSWORD_P_TOOLS else ("-a",) if tool == "redis-cli" else ()
    after_flag = False   # the previous element names a secret: ["--token", X], ("Authorization", X)
    for i, x in enumerate(v):
        word = _word(x)
        if after_flag and isinstance(x, (str, int, float, bytes)) and not isinstance(x, bool):
            out[i] = _redact(x, "argv", counts)
        elif p_flags == ("-p",) and word and word.startswith("-p") and len(word) > 2 and word != "-p" + REDACTED:
            counts["argv"] += 1
            out[i] = "-p" + REDACTED
        else:
            stack.append((x, out, i, depth + 1, users))
        after_flag = isinstance(word, str) and (ARGV_FLAG.fullmatch(word) is not None or word in p_flags
                                                or word.lower() in HEADER_NAMES)
    return out


def _dict(d: dict, depth: int, counts: Counter, stack: list, machine: Machine) -> dict:
    out: dict = {}
    is_secret_object = d.get("kind") == "Secret"
    is_env_pair = isinstance(d.get("name"), str) and "value" in d and _env_name(d["name"])
    for k, x in d.items():
        key = _string(k, counts, machine) if isinstance(k, str) else k
        if not isinstance(k, str):
            out[key] = None
            stack.append((x, out, key, depth + 1, False))
        elif k == "managedFields":
            out[key] = _redact(x, "managed_fields", counts)
        elif k == _LAST_APPLIED:
            out[key] = _redact(x, "last_applied", counts)
        elif is_secret_object and k in ("data", "stringData"):
            out[key] = _redact(x, "secret_object", counts)
        elif is_env_pair and k == "value":
            out[key] = _redact(x, "env", counts)
        elif isinstance(x, (bool, type(None))):
            out[key] = x
        elif _ENV_NAME.match(k) and _env_name(k):
            out[key] = _redact(x, "env", counts)
        elif norm_name(k) == "auth" and not isinstance(x, (dict, list)):
            out[key] = _redact(x, "registry_auth", counts)
        elif _secret_key(k):
            out[key] = _redact(x, "secret_key", counts)
        else:
            out[key] = None
            stack.append((x, out, key, depth + 1, k == "users" and isinstance(x, list)))
    return out


def _string(s: str, counts: Counter, machine: Machine) -> str:
    if s == REDACTED:
        return s
    if PEM.search(s):
        return _redact(s, "pem", counts)  # a key or certificate block: nothing around it is worth the risk
    body = s.rstrip("\r\n")
    embedded = _json_text(body, counts, machine)
    if embedded is not None:
        return embedded + s[len(body):]
    return machine.neutral(text_rules(s, counts), counts)


def _json_text(s: str, counts: Counter, machine: Machine, pretty: bool = False) -> str | None:
    """A string that is itself a JSON object or array (sacct --json kept as text, an annotation
    holding an object, a line of events.jsonl) is scrubbed as a structure; it is re-serialised only
    when something was removed or replaced, so clean evidence stays byte for byte as the scheduler
    printed it. pretty: written back indented (a whole rendered JSON file)."""
    t = s.strip()
    if len(t) < 2 or (t[0], t[-1]) not in (("{", "}"), ("[", "]")):
        return None
    try:
        parsed = json.loads(t)
    except ValueError:
        return None
    except RecursionError:   # deeper than the parser goes: nothing in it can be checked, so none of it is kept
        return _redact(s, "too_deep", counts)
    inner: Counter = Counter()
    cleaned = _walk(parsed, inner, machine)
    if not inner:
        return s
    counts.update(inner)
    if pretty:
        return json.dumps(cleaned, indent=2) + ("\n" if s.endswith("\n") else "")
    return json.dumps(cleaned, separators=(",", ":"))
