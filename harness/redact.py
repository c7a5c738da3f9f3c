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
- pem, jwt, bearer: a string holding a PEM block (or its base64), a JWT, or "Bearer <token>" /
  "Basic <credentials>";
- kubeconfig_user: a kubeconfig's users[].user (keys, certificates, tokens, exec plugins);
- secret_object: a Kubernetes Secret's data and stringData;
- managed_fields, last_applied: Kubernetes bookkeeping that copies whole objects, secrets included.

Scrubbing is idempotent: "<redacted>" is never counted again.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field

REDACTED = "<redacted>"

# substrings of a normalised key that make its value a secret
_SECRET_WORDS = ("token", "password", "passwd", "passphrase", "secret", "privatekey", "apikey", "accesskey",
                 "secretkey", "sshkey", "signingkey", "encryptionkey", "clientkey", "idrsa", "ided25519",
                 "idecdsa", "clientcertificatedata", "certificateauthoritydata", "authorization", "bearer",
                 "credential", "cookie", "sessionkey", "authprovider")
# a key ending like this names a secret object, it does not hold one (secretName, secretKeyRef)
_REFERENCE_SUFFIXES = ("ref", "refs", "name", "names")
_ENV_WORDS = ("TOKEN", "SECRET", "PASSW", "KEY", "CREDENTIAL", "AUTH")
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

_PEM = re.compile(r"-----BEGIN|LS0tLS1CRUdJT|BEGIN [A-Z ]*PRIVATE KEY")  # LS0tLS1CRUdJT: base64 of "-----BEGIN"
_JWT = re.compile(r"eyJ[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*")
_BEARER = re.compile(r"(?i)\b(bearer|basic)(\s+|%20)(?!<redacted>)[A-Za-z0-9._~+/=:-]+")
# NAME=value or NAME: value inside a string (an environment listing, a job script, a command line)
_ENV_ASSIGN = re.compile(r"(?i)\b(?=[A-Za-z_])([A-Za-z0-9_]*(?:" + "|".join(_ENV_WORDS) + r")[A-Za-z0-9_]*)"
                         r"(\"?\s*[=:]\s*)(?!<redacted>)(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"',;}\]]+)")


@dataclass
class Scrubbed:
    data: object
    by_rule: Counter = field(default_factory=Counter)

    @property
    def removed(self) -> int:
        return sum(self.by_rule.values())

    def summary(self) -> dict:
        return {"removed": self.removed, "by_rule": dict(sorted(self.by_rule.items()))}


def scrub(value: object) -> Scrubbed:
    """A redacted deep copy of `value` (any JSON-able structure) and what was removed, by rule."""
    counts: Counter = Counter()
    return Scrubbed(_walk(value, counts), counts)


def _norm(key: str) -> str:
    return re.sub(r"[-_.\s]", "", key).lower()


def _secret_key(key: str) -> bool:
    k = _norm(key)
    if k.endswith(_REFERENCE_SUFFIXES):
        return False
    return any(w in k for w in _SECRET_WORDS)


def _env_name(name: str) -> bool:
    up = name.upper()
    return any(w in up for w in _ENV_WORDS)


def _redact(value: object, rule: str, counts: Counter) -> object:
    """The replacement for a secret value; an already-redacted value stays as it is, uncounted."""
    if value == REDACTED:
        return value
    counts[rule] += 1
    return REDACTED


def _walk(v: object, counts: Counter) -> object:
    if isinstance(v, dict):
        return _walk_dict(v, counts)
    if isinstance(v, (list, tuple)):
        return [_walk(x, counts) for x in v]
    if isinstance(v, str):
        return _string(v, counts)
    return v


def _walk_dict(d: dict, counts: Counter) -> dict:
    out: dict = {}
    is_secret_object = d.get("kind") == "Secret"
    is_env_pair = isinstance(d.get("name"), str) and "value" in d and _env_name(d["name"])
    for k, x in d.items():
        key = _string(k, counts) if isinstance(k, str) else k
        if not isinstance(k, str):
            out[key] = _walk(x, counts)
        elif k == "managedFields":
            out[key] = _redact(x, "managed_fields", counts)
        elif k == _LAST_APPLIED:
            out[key] = _redact(x, "last_applied", counts)
        elif is_secret_object and k in ("data", "stringData"):
            out[key] = _redact(x, "secret_object", counts) if x else x
        elif is_env_pair and k == "value":
            out[key] = _redact(x, "env", counts)
        elif k == "users" and isinstance(x, list):
            out[key] = [_kube_user(u, counts) for u in x]
        elif isinstance(x, (bool, type(None))):
            out[key] = x
        elif _ENV_NAME.match(k) and _env_name(k):
            out[key] = _redact(x, "env", counts)
        elif _secret_key(k):
            out[key] = _redact(x, "secret_key", counts)
        else:
            out[key] = _walk(x, counts)
    return out


def _kube_user(u: object, counts: Counter) -> object:
    """A kubeconfig users[] entry keeps its name; everything under `user` is a credential."""
    if isinstance(u, dict) and "user" in u:
        return {k: (_redact(x, "kubeconfig_user", counts) if k == "user" else _walk(x, counts))
                for k, x in u.items()}
    return _walk(u, counts)


def _string(s: str, counts: Counter) -> str:
    if s == REDACTED:
        return s
    if _PEM.search(s):
        return _redact(s, "pem", counts)  # a key or certificate block: nothing around it is worth the risk
    embedded = _json_text(s, counts)
    if embedded is not None:
        return embedded
    for rule, pattern, repl in (("jwt", _JWT, lambda m: REDACTED),
                                ("bearer", _BEARER, lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}"),
                                ("env", _ENV_ASSIGN, lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}")):
        s, n = pattern.subn(repl, s)
        if n:
            counts[rule] += n
    return s


def _json_text(s: str, counts: Counter) -> str | None:
    """A string that is itself a JSON object or array (sacct --json kept as text, an annotation
    holding an object) is scrubbed as a structure; it is re-serialised only when something was
    removed, so clean evidence stays byte for byte as the scheduler printed it."""
    t = s.strip()
    if len(t) < 2 or (t[0], t[-1]) not in (("{", "}"), ("[", "]")):
        return None
    try:
        parsed = json.loads(t)
    except (ValueError, RecursionError):
        return None
    inner: Counter = Counter()
    cleaned = _walk(parsed, inner)
    if not inner:
        return s
    counts.update(inner)
    return json.dumps(cleaned, separators=(",", ":"))
