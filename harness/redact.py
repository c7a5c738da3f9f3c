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
Scrubbing is idempotent: "<redacted>" is never counted again.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field

from .redact_text import ARGV_FLAG, ENV_WORDS, HEADER_NAMES, PEM, REDACTED, text_rules

MAX_DEPTH = 200   # far beyond any scheduler's objects, far below what json.dumps and readers can nest

# substrings of a normalised key that make its value a secret
_SECRET_WORDS = ("token", "password", "passwd", "passphrase", "secret", "privatekey", "apikey", "accesskey",
                 "secretkey", "sshkey", "signingkey", "encryptionkey", "clientkey", "idrsa", "ided25519",
                 "idecdsa", "clientcertificatedata", "certificateauthoritydata", "authorization", "bearer",
                 "credential", "cookie", "sessionkey", "authprovider", "signature")
# normalised keys that are a secret only as a whole word (a registry's "auth": base64 user:password)
_SECRET_KEYS = ("auth", "xamzsignature", "sig")
# a key ending like this names a secret object, it does not hold one (secretName, secretKeyRef)
_REFERENCE_SUFFIXES = ("ref", "refs", "name", "names")
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


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
    if k in _SECRET_KEYS:
        return True
    if k.endswith(_REFERENCE_SUFFIXES):
        return False
    return any(w in k for w in _SECRET_WORDS)


def _env_name(name: str) -> bool:
    up = name.upper()
    return any(w in up for w in ENV_WORDS) or "PASS" in up   # PASS: DB_PASS; in free text it is too common


def _redact(value: object, rule: str, counts: Counter) -> object:
    """The replacement for a secret value; an already-redacted value stays as it is, uncounted."""
    if value == REDACTED:
        return value
    counts[rule] += 1
    return REDACTED


def _walk(root: object, counts: Counter) -> object:
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
            into[slot] = _dict(v, depth, counts, stack)
        elif isinstance(v, (list, tuple)):
            into[slot] = _list(v, depth, counts, stack, kube_user)
        elif isinstance(v, str):
            into[slot] = _string(v, counts)
        elif isinstance(v, (bytes, bytearray)):
            text = bytes(v).decode("utf-8", errors="replace")
            before = sum(counts.values())
            cleaned = _string(text, counts)
            into[slot] = v if sum(counts.values()) == before else cleaned
        else:
            into[slot] = v
    return top[0]


def _list(v: list | tuple, depth: int, counts: Counter, stack: list, users: bool) -> list:
    out: list = [None] * len(v)
    after_flag = False   # the previous element names a secret: ["--token", X], ("Authorization", X)
    for i, x in enumerate(v):
        if after_flag and isinstance(x, (str, int, float, bytes)) and not isinstance(x, bool):
            out[i] = _redact(x, "argv", counts)
        else:
            stack.append((x, out, i, depth + 1, users))
        word = x.decode("utf-8", errors="replace") if isinstance(x, (bytes, bytearray)) else x
        after_flag = isinstance(word, str) and (ARGV_FLAG.fullmatch(word) is not None
                                                or word.lower() in HEADER_NAMES)
    return out


def _dict(d: dict, depth: int, counts: Counter, stack: list) -> dict:
    out: dict = {}
    is_secret_object = d.get("kind") == "Secret"
    is_env_pair = isinstance(d.get("name"), str) and "value" in d and _env_name(d["name"])
    for k, x in d.items():
        key = _string(k, counts) if isinstance(k, str) else k
        if not isinstance(k, str):
            out[key] = None
            stack.append((x, out, key, depth + 1, False))
        elif k == "managedFields":
            out[key] = _redact(x, "managed_fields", counts)
        elif k == _LAST_APPLIED:
            out[key] = _redact(x, "last_applied", counts)
        elif is_secret_object and k in ("data", "stringData"):
            out[key] = _redact(x, "secret_object", counts) if x else x
        elif is_env_pair and k == "value":
            out[key] = _redact(x, "env", counts)
        elif isinstance(x, (bool, type(None))):
            out[key] = x
        elif _ENV_NAME.match(k) and _env_name(k):
            out[key] = _redact(x, "env", counts)
        elif _norm(k) == "auth" and not isinstance(x, (dict, list)):
            out[key] = _redact(x, "registry_auth", counts)
        elif _secret_key(k):
            out[key] = _redact(x, "secret_key", counts)
        else:
            out[key] = None
            stack.append((x, out, key, depth + 1, k == "users" and isinstance(x, list)))
    return out


def _string(s: str, counts: Counter) -> str:
    if s == REDACTED:
        return s
    if PEM.search(s):
        return _redact(s, "pem", counts)  # a key or certificate block: nothing around it is worth the risk
    embedded = _json_text(s, counts)
    if embedded is not None:
        return embedded
    return text_rules(s, counts)


def _json_text(s: str, counts: Counter) -> str | None:
    """A string that is itself a JSON object or array (sacct --json kept as text, an annotation
    holding an object) is scrubbed as a structure; it is re-serialised only when something was
    removed, so clean evidence stays byte for byte as the scheduler printed it."""
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
    cleaned = _walk(parsed, inner)
    if not inner:
        return s
    counts.update(inner)
    return json.dumps(cleaned, separators=(",", ":"))
