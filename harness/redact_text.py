"""The string rules of harness/redact.py: credentials inside free text (a job script, a command line,
a log or event message, a URL, a YAML or JSON line), each replaced in place so the text around it stays
readable; and `secret_name`, which says whether a key or variable name holds a secret, for both.

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

# -- names --------------------------------------------------------------------------------------------------------
# substrings of a normalised name (lower case, "-", "_", "." and spaces removed) that make its value a secret
_SECRET_WORDS = ("token", "password", "passwd", "passphrase", "secret", "privatekey", "privkey", "apikey",
                 "accesskey", "secretkey", "sshkey", "signingkey", "encryptionkey", "clientkey", "accountkey",
                 "masterkey", "authkey", "sessionkey", "licensekey", "deploykey", "idrsa", "ided25519", "idecdsa",
                 "storagekey", "mungekey", "sharedkey", "hmackey", "clientcertificatedata", "certificateauthoritydata",
                 "authorization", "bearer", "credential", "cookie", "authprovider", "signature")
# normalised names that are a secret only as a whole word (a registry's "auth": base64 user:password; a
# connection string's Pwd=)
_SECRET_KEYS = ("auth", "xamzsignature", "sig", "pwd")
# a name ending like this names where a secret is, or what kind, not the secret (secretName, secretKeyRef,
# token_env: SLURM_JWT, password_file, SSH_KEY_PATH, authType)
_REFERENCE_SUFFIXES = ("ref", "refs", "name", "names", "env", "file", "files", "path", "dir", "type", "mode")
# counts and tools named after tokens, not tokens: tokens_per_step, max_tokens, tokenizer
_COUNTED = re.compile(r"tokens|tokeniz")
_UPPER_PASS = re.compile(r"_(?:PASS|PWD)(?:_|$)|^PASS(?:_|$)")   # DB_PASS, MYSQL_PWD; not PWD, the working directory
_LOWER_PASS = re.compile(r"(?i)[_-](?:pass|pwd)$")        # db_pass, mysql-pwd; not bypass


def norm_name(name: str) -> str:
    return re.sub(r"[-_.\s]", "", name).lower()


def secret_name(name: str) -> bool:
    """Whether a key or variable of this name holds a secret (its value is replaced whatever it looks like).
    An UPPER_CASE name is an environment variable: any of ENV_WORDS in it (AWS_SECRET_ACCESS_KEY, HF_TOKEN,
    SSH_KEY); any other name needs a word that only names secrets (apiKey, client_secret, password, token),
    so a toleration's `key:`, `topologyKey` and `tokens_per_step` are left as they are."""
    k = norm_name(name)
    if not k or k.endswith(_REFERENCE_SUFFIXES):
        return False
    words = _COUNTED.sub("", k)
    if any(w in words for w in _SECRET_WORDS):
        return True
    if name.upper() == name and any(c.isalpha() for c in name):   # an environment variable
        up = re.sub(r"TOKENS|TOKENIZ", "", name.upper())
        return any(w in up for w in ENV_WORDS) or _UPPER_PASS.search(name) is not None
    return k in _SECRET_KEYS or _LOWER_PASS.search(name) is not None


# -- patterns -----------------------------------------------------------------------------------------------------
# LS0tLS1CRUdJT: base64 of "-----BEGIN"
PEM = re.compile(r"-----BEGIN|LS0tLS1CRUdJT|BEGIN [A-Z ]*PRIVATE KEY|PuTTY-User-Key-File-")
# a key or certificate block inside a longer text (a log, a rendered script), to its END line (or the text's end)
PEM_BLOCK = re.compile(r"-----BEGIN [A-Z0-9 ]*-----.*?(?:-----END [A-Z0-9 ]*-----|\Z)|LS0tLS1CRUdJT[A-Za-z0-9+/=]*"
                       r"|PuTTY-User-Key-File-\d.*?(?:Private-MAC: [0-9a-fA-F]+|\Z)", re.S)

# scheme://user:password@host, or scheme://<long token>@host (a token given as the user name)
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)" + _NOT_DONE
                           + r"(?:([^/\s:@'\"]*):([^/\s@'\"]+)|([^/\s:@'\"]{16,}))@")
# a query (or fragment) parameter that carries a signature or credential (pre-signed URLs, ?token=,
# ?sig=, #access_token=, JDBC's ?password=)
_QUERY = re.compile(r"(?i)([?&;#])((?:x-amz-|x-goog-)?(?:signature|sig|token|access_token|id_token|refresh_token|"
                    r"security-token|credential|code|key|api_key|apikey|secret|client_secret|password|passwd|pwd|"
                    r"auth))=" + _NOT_DONE + r"([^&#\s'\"<>]+)")
# chat and CI webhooks carry their secret in the path
_WEBHOOK = re.compile(r"(?i)(https?://(?:hooks\.slack\.com/(?:services|workflows|triggers)/|(?:[a-z]+\.)?discord(?:app)?"
                      r"\.com/api/webhooks/|[a-z0-9.-]*webhook\.office\.com/webhookb?2?/|outlook\.office\.com/webhook/))"
                      + _NOT_DONE + r"([^\s'\"<>?#]+)")
# an HTTP header that carries a credential, whatever its scheme ("Token X", "Bearer X", Digest, a cookie):
# quoted as in JSON or a Python repr (the value ends at its quote), or a header line (it ends the line)
HEADER_NAMES = ("authorization", "proxy-authorization", "x-api-key", "x-auth-token", "x-slurm-user-token",
                "private-token", "set-cookie", "cookie")
_HEADER_NAME = r"(?i)\b((?:proxy-)?authorization|x-api-key|x-auth-token|x-slurm-user-token|private-token|" \
               r"set-cookie|cookie)"
_HEADER_QUOTED = re.compile(_HEADER_NAME + r"(['\"]\s*[:=]\s*['\"])" + _NOT_DONE + r"([^'\"\r\n]+)")
_HEADER = re.compile(_HEADER_NAME + r"(\s*[:=]\s*)" + _NOT_DONE + r"([^\s'\"][^'\r\n]*)")
# tokens whose issuer gives them a fixed shape: source hosts and CI (GitHub, GitLab, Buildkite), chat (Slack,
# Telegram), clouds (AWS key ids, GCP API keys, Google OAuth access and refresh tokens, DigitalOcean), package
# registries (npm, PyPI, Docker Hub, RubyGems, NuGet, crates.io), payments and SaaS (Stripe, Twilio, SendGrid,
# Mailgun, Shopify, Atlassian, Linear, Notion, New Relic, Grafana), model hubs (Hugging Face, OpenAI and
# Anthropic's sk-), secret stores (Vault, Doppler, Terraform Cloud, Pulumi) and age keys
_PREFIXED = re.compile(
    r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,}|"
    r"gl(?:pat|rt|ptt|dt|cbt|soat|ffct|imt|agent|oas|ft)-[A-Za-z0-9_-]{20,}|GR1348941[A-Za-z0-9_-]{20,}|"
    r"bkua_[A-Za-z0-9]{30,}|xox[abeoprs]-[A-Za-z0-9-]{10,}|xapp-\d-[A-Za-z0-9-]{10,}|"
    r"(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}(?![0-9A-Z])|AIza[0-9A-Za-z_-]{35}|"
    r"ya29\.[0-9A-Za-z_-]{20,}|1//0[0-9A-Za-z_-]{20,}|do[opr]_v1_[a-f0-9]{64}|"
    r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])|pypi-[A-Za-z0-9_-]{50,}|dckr_pat_[A-Za-z0-9_-]{20,}|rubygems_[0-9a-f]{48}|"
    r"oy2[a-z0-9]{43}(?![a-z0-9])|cio[A-Za-z0-9]{32}(?![A-Za-z0-9])|"
    r"(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{10,}|whsec_[A-Za-z0-9+/=]{20,}|SK[0-9a-f]{32}(?![0-9a-f])|"
    r"SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}|key-[0-9a-f]{32}(?![0-9a-f])|shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}|"
    r"ATATT3[A-Za-z0-9_=-]{50,}|lin_api_[A-Za-z0-9]{40}|(?:ntn|secret)_[A-Za-z0-9]{40,}|NRAK-[A-Z0-9]{27}|"
    r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}|glc_[A-Za-z0-9+/]{32,}={0,2}|"
    r"hf_[A-Za-z0-9]{30,}|sk-[A-Za-z0-9_-]{20,}|"
    r"hv[sbr]\.[A-Za-z0-9_-]{20,}|dp\.(?:st|ct|sa|scim|audit|pt)\.(?:[a-z0-9_-]{2,12}\.)?[A-Za-z0-9_-]{40,}|"
    r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,}|pul-[a-f0-9]{40}|AGE-SECRET-KEY-1[0-9A-Z]{50,})")
# a Telegram bot's token: <bot id>:<35 characters>, also inside api.telegram.org/bot<token>/
_TELEGRAM = re.compile(r"(?<![0-9])[0-9]{8,10}:[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])")
JWT = re.compile(r"eyJ[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*")
# a JWT whose header is not the compact {"alg"...}: "{ ", "{\n" encode as ew..., ey... other than eyJ
_JWT_LOOSE = re.compile(r"\be[wy][A-Za-z0-9_-]{6,}={0,2}\.[A-Za-z0-9_-]{2,}={0,2}\.[A-Za-z0-9_-]*")
BEARER = re.compile(r"(?i)\b(bearer|basic)(\s+|%20)" + _NOT_DONE + r"([A-Za-z0-9._~+/=:-]+)")
# a command-line option that names a secret, then its value: --token X, --password=X, --api-key 'X', --pass X
_FLAG = r"--?[a-z0-9_-]*(?:token(?!s|iz)|passw|passphrase|pass(?![a-z])|secret|credential|auth|" \
        r"(?:api|access|account|storage|shared|munge|private|signing|encryption|master|license|deploy|ssh|client|" \
        r"session|hmac)[-_]?key(?![a-z]))[a-z0-9_-]*"
# a value: quoted (also with its quotes escaped, as in JSON inside a message), or up to a separator
_VALUE = r"(\\+\"[^\"\\\n]*\\+\"|\"[^\"\n]*\"|'[^'\n]*'|[^\s\"',;}\]\\]+)"
# where a command starts: a word's start, or just after an escaped newline or tab (a script inside JSON text)
_START = r"(?:(?<=\\[nrt])|(?<![\w-]))"
_ARGV = re.compile(r"(?i)(?<![\w-])(" + _FLAG + r")(=|\s+|\\*[\"']\s*,\s*\\*[\"'])" + _NOT_DONE + _VALUE)
# an argv element that names a secret, so the next element is its value
ARGV_FLAG = re.compile(r"(?i)" + _FLAG)
# tools whose -p is the password (mysql -pSECRET, mysql -p SECRET, sshpass -p SECRET), and redis-cli's -a
PASSWORD_P_TOOLS = frozenset({"mysql", "mysqldump", "mysqladmin", "mysqlimport", "mysqlcheck", "mysqlshow", "mysqlpump",
                              "mysqlsh", "mariadb", "mariadb-dump", "mariadb-admin", "mariadbdump", "mariadbadmin",
                              "mongo", "mongosh", "mongodump", "mongorestore", "mongoexport", "mongoimport", "sshpass"})
_P_TOOL = "|".join(sorted((re.escape(t) for t in PASSWORD_P_TOOLS), key=len, reverse=True))
_DASH_P = re.compile(_START + r"((?:" + _P_TOOL + r")(?![\w-])[^\n|;&]*?\s-p)(\s*)" + _NOT_DONE
                     + r"(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'-][^\s\"']*)")
_REDIS_A = re.compile(_START + r"(redis-cli\b[^\n|;&]*?\s-a\s+)" + _NOT_DONE + r"(\S+)")
# openssl's pass:SECRET (env:VAR and file:PATH name where it is and are kept)
_PASS_ARG = re.compile(r"(?<![\w./-])(pass:)" + _NOT_DONE + r"([^\s\"']+)")
# credentials that tools take in their own shapes: curl -u user:password, a .netrc line
# (curl's only: docker's --user is uid:gid)
_USER_PASS = re.compile(_START + r"(curl\b[^\n]*?\s(?:-u|--user)(?:\s+|=)[^\s:'\"]+):" + _NOT_DONE + r"([^\s'\"]+)")
_NETRC = re.compile(r"(?i)(\blogin\s+\S+\s+password\s+)" + _NOT_DONE + r"(\S+)")
# NAME=value, NAME: value or "name": "value" inside a string (an environment listing, a job script, a command
# line, a YAML or JSON line); secret_name decides. "NAME= next" is an empty value, not "next".
_ENV_ASSIGN = re.compile(r"(?i)\b(?=[A-Za-z_])([A-Za-z0-9_-]*(?:token|secret|pass|pwd|key|credential|auth|cookie|"
                         r"sig|bearer)[A-Za-z0-9_-]*)(\\*\"?(?:[ \t]*:[ \t]*|=|[ \t]+=[ \t]+))" + _NOT_DONE + _VALUE)


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


def _bearer(m: re.Match) -> str:
    """"Bearer X" / "Basic X" with X credential-like: long enough and not a plain lower-case word ("basic setup")."""
    token = m.group(3)
    if len(token) < 8 or (token.isalpha() and token.islower()):
        return m.group(0)
    return f"{m.group(1)}{m.group(2)}{REDACTED}"


# values that say a secret is not there (automountServiceAccountToken: false, PASSWORD="")
_NO_VALUE = frozenset({"true", "false", "null", "none", "yes", "no", "~", '""', "''"})


def _assign(m: re.Match) -> str:
    if secret_name(m.group(1)) and m.group(3).lower() not in _NO_VALUE:
        return f"{m.group(1)}{m.group(2)}{REDACTED}"
    # not a secret's name (key: PASSWORD=x): its value may still hold an assignment that is
    return m.group(1) + m.group(2) + _ENV_ASSIGN.sub(_assign, m.group(3))


RULES: list[tuple[str, re.Pattern, Callable[[re.Match], str]]] = [
    ("url_credentials", _URL_USERINFO, _userinfo),
    ("url_signature", _QUERY, lambda m: f"{m.group(1)}{m.group(2)}={REDACTED}"),
    ("webhook_url", _WEBHOOK, lambda m: f"{m.group(1)}{REDACTED}"),
    ("auth_header", _HEADER_QUOTED, lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}"),
    ("auth_header", _HEADER, lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}"),
    ("prefixed_token", _PREFIXED, lambda m: REDACTED),
    ("prefixed_token", _TELEGRAM, lambda m: REDACTED),
    ("jwt", JWT, lambda m: REDACTED),
    ("jwt", _JWT_LOOSE, _loose_jwt),
    ("bearer", BEARER, _bearer),
    ("argv", _ARGV, lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}"),
    ("argv", _DASH_P, lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}"),
    ("argv", _REDIS_A, lambda m: f"{m.group(1)}{REDACTED}"),
    ("argv", _PASS_ARG, lambda m: f"{m.group(1)}{REDACTED}"),
    ("argv", _USER_PASS, lambda m: f"{m.group(1)}:{REDACTED}"),
    ("netrc", _NETRC, lambda m: f"{m.group(1)}{REDACTED}"),
    ("env", _ENV_ASSIGN, _assign),
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
