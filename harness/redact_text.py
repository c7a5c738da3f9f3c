"""The string rules of harness/redact.py: credentials inside free text (a job script, a command line,
a log or event message, a URL), each replaced in place so the text around it stays readable.

Every pattern refuses to match "<redacted>" itself, so a second pass removes nothing.
"""
from __future__ import annotations

import base64
import binascii
import re
from collections import Counter
from collections.abc import Callable

REDACTED = "<redacted>"
_NOT_DONE = r"(?!<redacted>)"

ENV_WORDS = ("TOKEN", "SECRET", "PASSW", "KEY", "CREDENTIAL", "AUTH")

PEM = re.compile(r"-----BEGIN|LS0tLS1CRUdJT|BEGIN [A-Z ]*PRIVATE KEY")  # LS0tLS1CRUdJT: base64 of "-----BEGIN"

# scheme://user:password@host, or scheme://<long token>@host (a token given as the user name)
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)" + _NOT_DONE
                           + r"(?:([^/\s:@'\"]*):([^/\s@'\"]+)|([^/\s:@'\"]{16,}))@")
# a query (or fragment) parameter that carries a signature or credential (pre-signed URLs, ?token=,
# ?sig=, #access_token=)
_QUERY = re.compile(r"(?i)([?&;#])((?:x-amz-|x-goog-)?(?:signature|sig|token|access_token|id_token|"
                    r"security-token|credential|code|key|api_key|apikey|secret|password|passwd|auth)"
                    r")=" + _NOT_DONE + r"([^&#\s'\"<>]+)")
# an HTTP header that carries a credential, whatever its scheme ("Token X", "Bearer X", Digest, a cookie):
# quoted as in JSON or a Python repr (the value ends at its quote), or a header line (it ends the line)
HEADER_NAMES = ("authorization", "proxy-authorization", "x-api-key", "x-auth-token", "x-slurm-user-token",
                "private-token", "set-cookie", "cookie")
_HEADER_NAME = r"(?i)\b((?:proxy-)?authorization|x-api-key|x-auth-token|x-slurm-user-token|private-token|" \
               r"set-cookie|cookie)"
_HEADER_QUOTED = re.compile(_HEADER_NAME + r"(['\"]\s*[:=]\s*['\"])" + _NOT_DONE + r"([^'\"\r\n]+)")
_HEADER = re.compile(_HEADER_NAME + r"(\s*[:=]\s*)" + _NOT_DONE + r"([^\s'\"][^'\r\n]*)")
# tokens whose issuer gives them a fixed prefix: GitHub, GitLab, Slack, Hugging Face, AWS key ids, npm, API keys
_PREFIXED = re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,}|glpat-[A-Za-z0-9_-]{20,}|"
                       r"xox[abprs]-[A-Za-z0-9-]{10,}|hf_[A-Za-z0-9]{30,}|(?:AKIA|ASIA)[0-9A-Z]{16}|"
                       r"npm_[A-Za-z0-9]{36}|sk-[A-Za-z0-9_-]{20,})\b")
JWT = re.compile(r"eyJ[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*")
# a JWT whose header is not the compact {"alg"...}: "{ ", "{\n" encode as ew..., ey... other than eyJ
_JWT_LOOSE = re.compile(r"\be[wy][A-Za-z0-9_-]{6,}={0,2}\.[A-Za-z0-9_-]{2,}={0,2}\.[A-Za-z0-9_-]*")
BEARER = re.compile(r"(?i)\b(bearer|basic)(\s+|%20)" + _NOT_DONE + r"[A-Za-z0-9._~+/=:-]+")
# a command-line option that names a secret, then its value: --token X, --password=X, --api-key 'X'
_ARGV = re.compile(r"(?i)(?<![\w-])(--?[a-z0-9_-]*(?:token|passw|secret|credential|apikey|api-key|api_key|"
                   r"auth)[a-z0-9_-]*)(=|\s+)" + _NOT_DONE + r"(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"',;}\]]+)")
# credentials that tools take in their own shapes: curl -u user:password, sshpass -p X, a .netrc line
# (curl's only: docker's --user is uid:gid)
_USER_PASS = re.compile(r"(\bcurl\b[^\n]*?\s(?:-u|--user)(?:\s+|=)[^\s:'\"]+):" + _NOT_DONE + r"([^\s'\"]+)")
_SSHPASS = re.compile(r"\b(sshpass\s+-p\s*)" + _NOT_DONE + r"(\S+)")
_NETRC = re.compile(r"(?i)(\blogin\s+\S+\s+password\s+)" + _NOT_DONE + r"(\S+)")
# NAME=value or NAME: value inside a string (an environment listing, a job script, a command line)
_ENV_ASSIGN = re.compile(r"(?i)\b(?=[A-Za-z_])([A-Za-z0-9_]*(?:" + "|".join(ENV_WORDS) + r")[A-Za-z0-9_]*)"
                         r"(\"?\s*[=:]\s*)" + _NOT_DONE + r"(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"',;}\]]+)")
# an argv element that names a secret, so the next element is its value
ARGV_FLAG = re.compile(r"(?i)--?[a-z0-9_-]*(?:token|passw|secret|credential|apikey|api-key|api_key|auth)"
                       r"[a-z0-9_-]*")


def _userinfo(m: re.Match) -> str:
    if m.group(4) is not None:
        return f"{m.group(1)}{REDACTED}@"
    return f"{m.group(1)}{m.group(2)}:{REDACTED}@"


def _loose_jwt(m: re.Match) -> str:
    """A token shaped like a JWT is one when its first part decodes to a JSON header naming alg or typ."""
    head = m.group(0).split(".", 1)[0].rstrip("=")
    try:
        text = base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)).decode("utf-8")
    except (binascii.Error, ValueError):
        return m.group(0)
    if text.lstrip().startswith("{") and ('"alg"' in text or '"typ"' in text):
        return REDACTED
    return m.group(0)


RULES: list[tuple[str, re.Pattern, Callable[[re.Match], str]]] = [
    ("url_credentials", _URL_USERINFO, _userinfo),
    ("url_signature", _QUERY, lambda m: f"{m.group(1)}{m.group(2)}={REDACTED}"),
    ("auth_header", _HEADER_QUOTED, lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}"),
    ("auth_header", _HEADER, lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}"),
    ("prefixed_token", _PREFIXED, lambda m: REDACTED),
    ("jwt", JWT, lambda m: REDACTED),
    ("jwt", _JWT_LOOSE, _loose_jwt),
    ("bearer", BEARER, lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}"),
    ("argv", _ARGV, lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}"),
    ("argv", _USER_PASS, lambda m: f"{m.group(1)}:{REDACTED}"),
    ("argv", _SSHPASS, lambda m: f"{m.group(1)}{REDACTED}"),
    ("netrc", _NETRC, lambda m: f"{m.group(1)}{REDACTED}"),
    ("env", _ENV_ASSIGN, lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}"),
]


def text_rules(s: str, counts: Counter) -> str:
    """s with every credential the text rules find replaced, counted by rule."""
    for rule, pattern, repl in RULES:
        n = 0

        def sub(m: re.Match, repl=repl) -> str:
            nonlocal n
            out = repl(m)
            n += out != m.group(0)
            return out

        s = pattern.sub(sub, s)
        if n:
            counts[rule] += n
    return s
