"""A corpus of credential shapes as they reach a results directory: the common token formats of cloud
providers, CI systems, package registries, chat bots and SaaS APIs, database URLs, PEM and SSH keys, JWTs,
and the command-line forms tools take passwords in; each written in several contexts (an environment
variable, a command line as text and as an argv list, a URL, a log line, a YAML value, a JSON value).

Every value is generated here from a seeded random body (no real credential, and nothing a secret scanner
would mistake for a leaked one in the repository), and every (shape, context) pair gets a body of its own,
so a survivor found in a stored file names the pair it came from. `survivors(text, cases)` lists the pairs
whose body is still in `text`.

Kinds: "token" is known by its form alone (so its contexts use names that say nothing: VALUE, --opt,
value:); "named" only by the name it goes by (AWS_SECRET_ACCESS_KEY, --password, password:); "url"
carries it in a URL; "block" is a PEM or key file; "command" is a tool's own password argument.
"""
from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable
from dataclasses import dataclass

ALNUM = string.ascii_letters + string.digits
LOWER_HEX = "0123456789abcdef"
UPPER_ALNUM = string.ascii_uppercase + string.digits
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"


@dataclass(frozen=True)
class Shape:
    name: str
    kind: str                                   # token | named | url | block | command
    make: Callable[[Callable[[str, int], str]], tuple[str, str]]   # rnd -> (the credential as written, its body)
    var: str = ""                               # named: the variable / key it goes by (UPPER_CASE)
    flag: str = ""                              # named: the command-line option it goes by


@dataclass(frozen=True)
class Case:
    shape: str
    kind: str
    context: str
    value: object                               # text, or a structure (argv list, JSON value)
    core: str                                   # the random body that must not survive

    @property
    def text(self) -> str:
        return self.value if isinstance(self.value, str) else json.dumps(self.value)


def _tok(prefix: str, alphabet: str, n: int, suffix: str = ""):
    def make(rnd):
        body = rnd(alphabet, n)
        return f"{prefix}{body}{suffix}", body
    return make


def _jwt(alg: str):
    def make(rnd):
        head = base64.urlsafe_b64encode(json.dumps({"alg": alg, "typ": "JWT"}).encode()).decode().rstrip("=")
        payload = base64.urlsafe_b64encode(json.dumps({"sub": rnd(LOWER_HEX, 12), "iat": 1796230187})
                                           .encode()).decode().rstrip("=")
        sig = rnd(URLSAFE, 43)
        return f"{head}.{payload}.{sig}", sig
    return make


def _pem(label: str):
    def make(rnd):
        lines = [rnd(B64, 64) for _ in range(4)]
        return f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----", lines[1]
    return make


def _putty(rnd):
    body, public, mac = rnd(B64, 64), rnd(B64, 32), rnd(LOWER_HEX, 64)
    return ("PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: poc\nPublic-Lines: 2\n"
            f"AAAAC3NzaC1lZDI1NTE5AAAAI{public}\nPrivate-Lines: 1\n{body}\nPrivate-MAC: {mac}"), body


def _b64_pem(rnd):
    line = rnd(B64, 64)
    pem = f"-----BEGIN RSA PRIVATE KEY-----\n{line}\n-----END RSA PRIVATE KEY-----\n"
    enc = base64.b64encode(pem.encode()).decode()
    return enc, enc[40:80]


def _url(template: str, alphabet: str = ALNUM, n: int = 24):
    def make(rnd):
        body = rnd(alphabet, n)
        return template.format(body), body
    return make


def _basic(rnd):
    body = rnd(ALNUM, 20)
    return "Basic " + base64.b64encode(f"deploy:{body}".encode()).decode(), base64.b64encode(
        f"deploy:{body}".encode()).decode()[8:28]


def _docker_auth(rnd):
    body = rnd(ALNUM, 20)
    enc = base64.b64encode(f"ci-bot:{body}".encode()).decode()
    return json.dumps({"auths": {"registry.example.org": {"auth": enc}}}), enc[8:28]


def _gcp_sa(rnd):
    line = rnd(B64, 64)
    doc = {"type": "service_account", "project_id": "poc-demo", "private_key_id": rnd(LOWER_HEX, 40),
           "private_key": f"-----BEGIN PRIVATE KEY-----\n{line}\n-----END PRIVATE KEY-----\n",
           "client_email": "poc@poc-demo.iam.gserviceaccount.com"}
    return json.dumps(doc), line


def _telegram(rnd):
    body = "AA" + rnd(URLSAFE, 33)
    return f"{rnd('123456789', 9)}:{body}", body


def _sendgrid(rnd):
    body = rnd(URLSAFE, 43)
    return f"SG.{rnd(URLSAFE, 22)}.{body}", body


def _stripe(kind):
    return _tok(f"{kind}_live_", ALNUM, 24)


SHAPES: list[Shape] = [
    # -- clouds -----------------------------------------------------------------------------------------------------
    Shape("aws access key id", "token", _tok("AKIA", UPPER_ALNUM, 16)),
    Shape("aws temporary access key id", "token", _tok("ASIA", UPPER_ALNUM, 16)),
    Shape("aws secret access key", "named", _tok("", B64, 40), "AWS_SECRET_ACCESS_KEY", "--aws-secret-access-key"),
    Shape("aws session token", "named", _tok("FwoGZXIvYXdzE", B64, 120), "AWS_SESSION_TOKEN", "--session-token"),
    Shape("gcp api key", "token", _tok("AIza", URLSAFE, 35)),
    Shape("google oauth access token", "token", _tok("ya29.", URLSAFE, 60)),
    Shape("google refresh token", "token", _tok("1//0", URLSAFE, 60)),
    Shape("gcp service account json", "block", _gcp_sa),
    Shape("azure storage account key", "named", _tok("", B64, 86, "=="), "AZURE_STORAGE_KEY", "--account-key"),
    Shape("azure connection string", "token", _url("DefaultEndpointsProtocol=https;AccountName=pocdemo;"
                                                   "AccountKey={}==;EndpointSuffix=core.windows.net", B64, 86)),
    Shape("azure client secret", "named", _tok("", ALNUM + "~._-", 40), "AZURE_CLIENT_SECRET", "--client-secret"),
    Shape("azure sas url", "url", _url("https://pocdemo.blob.core.windows.net/ckpt/model.pt?sv=2022-11-02&ss=b"
                                       "&srt=o&sp=r&se=2026-12-31&sig={}%3D", ALNUM, 43)),
    Shape("aws presigned url", "url", _url("https://poc-ckpt.s3.amazonaws.com/model.pt?X-Amz-Algorithm=AWS4-HMAC-"
                                           "SHA256&X-Amz-Expires=600&X-Amz-Signature={}", LOWER_HEX, 64)),
    Shape("digitalocean token", "token", _tok("dop_v1_", LOWER_HEX, 64)),
    Shape("cloudflare api token", "named", _tok("", URLSAFE, 40), "CLOUDFLARE_API_TOKEN", "--api-token"),
    Shape("heroku api key", "named", _tok("", LOWER_HEX, 32), "HEROKU_API_KEY", "--api-key"),
    # -- source hosts and CI ----------------------------------------------------------------------------------------
    Shape("github classic pat", "token", _tok("ghp_", ALNUM, 36)),
    Shape("github fine-grained pat", "token", _tok("github_pat_", ALNUM + "_", 82)),
    Shape("github oauth token", "token", _tok("gho_", ALNUM, 36)),
    Shape("github app token", "token", _tok("ghs_", ALNUM, 36)),
    Shape("github refresh token", "token", _tok("ghr_", ALNUM, 36)),
    Shape("gitlab pat", "token", _tok("glpat-", URLSAFE, 20)),
    Shape("gitlab runner token", "token", _tok("glrt-", URLSAFE, 24)),
    Shape("gitlab pipeline trigger token", "token", _tok("glptt-", LOWER_HEX, 40)),
    Shape("gitlab deploy token", "token", _tok("gldt-", URLSAFE, 20)),
    Shape("buildkite agent token", "token", _tok("bkua_", LOWER_HEX, 40)),
    Shape("circleci token", "named", _tok("", LOWER_HEX, 40), "CIRCLE_TOKEN", "--token"),
    Shape("jenkins api token in a url", "url", _url("https://ci-bot:{}@jenkins.example.org/job/poc/build",
                                                    LOWER_HEX, 34)),
    Shape("git clone with a token", "url", _url("https://oauth2:{}@git.example.org/hpc/poc.git", URLSAFE, 24)),
    # -- package registries -----------------------------------------------------------------------------------------
    Shape("pypi token", "token", _tok("pypi-AgEIcHlwaS5vcmc", URLSAFE, 70)),
    Shape("npm token", "token", _tok("npm_", ALNUM, 36)),
    Shape("docker hub pat", "token", _tok("dckr_pat_", URLSAFE, 27)),
    Shape("rubygems key", "token", _tok("rubygems_", LOWER_HEX, 48)),
    Shape("nuget key", "token", _tok("oy2", string.ascii_lowercase + string.digits, 43)),
    Shape("crates.io token", "token", _tok("cio", ALNUM, 32)),
    Shape("docker config auth", "block", _docker_auth),
    # -- chat bots and webhooks -------------------------------------------------------------------------------------
    Shape("slack bot token", "token", _tok("xoxb-2716-3855-", ALNUM, 24)),
    Shape("slack user token", "token", _tok("xoxp-2716-3855-", ALNUM, 32)),
    Shape("slack app token", "token", _tok("xapp-1-A05-", ALNUM, 40)),
    Shape("slack webhook", "url", _url("https://hooks.slack.com/services/T0A1B2C3D/B0E4F5G6H/{}", ALNUM, 24)),
    Shape("discord webhook", "url", _url("https://discord.com/api/webhooks/1181234567890123456/{}", URLSAFE, 68)),
    Shape("teams webhook", "url", _url("https://pocdemo.webhook.office.com/webhookb2/{}@a1b2/IncomingWebhook/x",
                                       LOWER_HEX, 32)),
    Shape("telegram bot token", "token", _telegram),
    Shape("discord bot token", "named", _tok("MTE4MTIzNDU2Nzg5MDEyMzQ1Ng.Gx1y2z.", URLSAFE, 38), "DISCORD_TOKEN",
          "--bot-token"),
    # -- payments, SaaS and model hubs ------------------------------------------------------------------------------
    Shape("stripe secret key", "token", _stripe("sk")),
    Shape("stripe restricted key", "token", _stripe("rk")),
    Shape("stripe webhook secret", "token", _tok("whsec_", ALNUM, 32)),
    Shape("twilio api key", "token", _tok("SK", LOWER_HEX, 32)),
    Shape("sendgrid key", "token", _sendgrid),
    Shape("mailgun key", "token", _tok("key-", LOWER_HEX, 32)),
    Shape("shopify token", "token", _tok("shpat_", LOWER_HEX, 32)),
    Shape("atlassian api token", "token", _tok("ATATT3xFfGF0", URLSAFE, 180)),
    Shape("linear api key", "token", _tok("lin_api_", ALNUM, 40)),
    Shape("notion token", "token", _tok("ntn_", ALNUM, 46)),
    Shape("new relic key", "token", _tok("NRAK-", UPPER_ALNUM, 27)),
    Shape("grafana service account token", "token", _tok("glsa_", ALNUM, 32, "_1a2b3c4d")),
    Shape("openai key", "token", _tok("sk-proj-", URLSAFE, 48)),
    Shape("anthropic key", "token", _tok("sk-ant-api03-", URLSAFE, 93)),
    Shape("hugging face token", "token", _tok("hf_", ALNUM, 34)),
    Shape("wandb api key", "named", _tok("", LOWER_HEX, 40), "WANDB_API_KEY", "--wandb-api-key"),
    Shape("datadog api key", "named", _tok("", LOWER_HEX, 32), "DD_API_KEY", "--api-key"),
    # -- secret stores and keys -------------------------------------------------------------------------------------
    Shape("vault service token", "token", _tok("hvs.", URLSAFE, 90)),
    Shape("vault batch token", "token", _tok("hvb.", URLSAFE, 120)),
    Shape("age secret key", "token", _tok("AGE-SECRET-KEY-1", "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58)),
    Shape("doppler token", "token", _tok("dp.st.prd.", ALNUM, 40)),
    Shape("terraform cloud token", "token", _tok("a1B2c3D4e5F6g7.atlasv1.", URLSAFE, 67)),
    Shape("pulumi token", "token", _tok("pul-", LOWER_HEX, 40)),
    Shape("munge key in base64", "named", _tok("", B64, 88), "MUNGE_KEY", "--munge-key"),
    # -- databases --------------------------------------------------------------------------------------------------
    Shape("postgres url", "url", _url("postgres://poc:{}@db.example.org:5432/runs?sslmode=require", ALNUM, 20)),
    Shape("mysql url", "url", _url("mysql://slurm:{}@slurmdbd.example.org:3306/slurm_acct_db", ALNUM, 20)),
    Shape("mongodb srv url", "url", _url("mongodb+srv://poc:{}@cluster0.example.mongodb.net/?retryWrites=true",
                                         ALNUM, 20)),
    Shape("redis url", "url", _url("redis://:{}@cache.example.org:6379/0", ALNUM, 20)),
    Shape("amqp url", "url", _url("amqp://poc:{}@mq.example.org:5672/vhost", ALNUM, 20)),
    Shape("jdbc url", "url", _url("jdbc:postgresql://db.example.org:5432/runs?user=poc&password={}", ALNUM, 20)),
    Shape("db password", "named", _tok("", ALNUM + "!#%", 18), "DB_PASSWORD", "--db-password"),
    Shape("postgres password", "named", _tok("", ALNUM, 18), "PGPASSWORD", "--password"),
    Shape("mysql pwd", "named", _tok("", ALNUM, 18), "MYSQL_PWD", "--pass"),
    Shape("mysql -pSECRET", "command", _url("mysql -u slurm -p{} -h slurmdbd slurm_acct_db", ALNUM, 18)),
    Shape("mysql -p SECRET", "command", _url("mysqldump --single-transaction -u root -p {} slurm_acct_db", ALNUM, 18)),
    Shape("mariadb -pSECRET", "command", _url("mariadb -uroot -p{} -e 'show databases'", ALNUM, 18)),
    Shape("sshpass -p", "command", _url("sshpass -p {} ssh -o StrictHostKeyChecking=no poc@login1", ALNUM, 18)),
    Shape("openssl pass:", "command", _url("openssl enc -aes-256-cbc -pass pass:{} -in model.pt -out model.enc",
                                           ALNUM, 18)),
    Shape("redis-cli -a", "command", _url("redis-cli -h cache -a {} ping", ALNUM, 18)),
    Shape("curl -u", "command", _url("curl -fsS -u admin:{} https://grafana.example.org/api/health", ALNUM, 18)),
    Shape("netrc", "command", _url("machine git.example.org login poc password {}", ALNUM, 18)),
    # -- keys, certificates and tokens of the schedulers ------------------------------------------------------------
    Shape("rsa private key", "block", _pem("RSA PRIVATE KEY")),
    Shape("openssh private key", "block", _pem("OPENSSH PRIVATE KEY")),
    Shape("ec private key", "block", _pem("EC PRIVATE KEY")),
    Shape("pkcs8 private key", "block", _pem("PRIVATE KEY")),
    Shape("pgp private key", "block", _pem("PGP PRIVATE KEY BLOCK")),
    Shape("putty private key", "block", _putty),
    Shape("base64 pem (client-key-data)", "token", _b64_pem),
    Shape("jwt hs256", "token", _jwt("HS256")),
    Shape("kubernetes service account token", "token", _jwt("RS256")),
    Shape("slurm jwt", "named", _jwt("HS256"), "SLURM_JWT", "--jwt-token"),
    Shape("kubeadm bootstrap token", "named", _url("abcdef.{}", string.ascii_lowercase + string.digits, 16),
          "KUBEADM_TOKEN", "--token"),
    Shape("bearer header", "token", _url("Authorization: Bearer {}", URLSAFE, 40)),
    Shape("basic auth header", "token", _basic),
    Shape("cookie header", "token", _url("Cookie: session={}; theme=dark", URLSAFE, 32)),
    Shape("x-api-key header", "token", _url("X-Api-Key: {}", ALNUM, 32)),
]

CONTEXTS = ("env", "argv", "argv_list", "url", "log", "yaml", "json")


def _rng(seed: str):
    r = random.Random(seed)

    def rnd(alphabet: str, n: int) -> str:
        return "".join(r.choice(alphabet) for _ in range(n))
    return rnd


def _in_context(shape: Shape, context: str, secret: str) -> object | None:
    """The credential as it appears in one context; None where the context makes no sense for the shape."""
    one_line = "\n" not in secret
    if shape.kind == "named":
        var, flag, key = shape.var, shape.flag, shape.var.lower()
        return {"env": f"export {var}={secret}", "argv": f"poc-tool {flag} {secret} --steps 40",
                "argv_list": ["poc-tool", flag, secret, "--steps", "40"],
                "url": f"https://svc.example.org/v1/login?{key}=x&password={secret}&next=%2F",
                "log": f"2026-12-07T02:08:57Z INFO setup: {var}={secret} exported for the job",
                "yaml": f"spec:\n  {key}: {secret}\n  replicas: 2\n",
                "json": {"env": {var: secret}, "steps": 40}}[context]
    if shape.kind == "command":
        return {"env": f"export SETUP_CMD='{secret}'", "argv": f"bash -c \"{secret}\"",
                "argv_list": ["bash", "-c", secret], "url": None,
                "log": f"+ {secret}", "yaml": f"command: {secret}\n", "json": {"script": f"#!/bin/bash\n{secret}\n"}
                }[context]
    if shape.kind == "block":
        return {"env": f"export TLS_MATERIAL='{secret}'" if one_line else None,
                "argv": None, "argv_list": ["kubectl", "create", "configmap", "--from-literal", f"value={secret}"],
                "url": None, "log": f"2026-12-07T02:08:57Z DEBUG loaded:\n{secret}\nnext line",
                "yaml": "data:\n  material: |\n" + "".join(f"    {ln}\n" for ln in secret.splitlines()),
                "json": {"material": secret}}[context]
    # token and url: known by their form, in contexts whose names say nothing
    return {"env": f"export DEPLOY_VALUE={secret}" if one_line else None,
            "argv": f"poc-tool --opt {secret} --steps 40", "argv_list": ["poc-tool", "--opt", secret, "--steps", "40"],
            "url": (f"https://proxy.example.org/fetch?u={secret}" if shape.kind == "url"
                    else f"https://svc.example.org/v1/items/{secret}/status" if one_line else None),
            "log": f"2026-12-07T02:08:57Z INFO uploader: using {secret} for the push",
            "yaml": f"spec:\n  value: {secret}\n  replicas: 2\n" if one_line else None,
            "json": {"settings": {"value": secret, "steps": 40}}}[context]


def cases(seed: str = "poc-secret-corpus") -> list[Case]:
    """Every (shape, context) pair that makes sense, each with a body of its own."""
    out = []
    for shape in SHAPES:
        for context in CONTEXTS:
            secret, core = shape.make(_rng(f"{seed}/{shape.name}/{context}"))
            value = _in_context(shape, context, secret)
            if value is not None:
                out.append(Case(shape.name, shape.kind, context, value, core))
    return out


def survivors(text: str, among: list[Case]) -> list[Case]:
    """The cases whose body (or a part of it) is still in text."""
    def parts(core: str) -> tuple[str, ...]:
        n = min(len(core), 12)
        return (core, core[:n], core[-n:], core[len(core) // 2 - n // 2:][:n])
    return [c for c in among if any(p in text for p in parts(c.core))]
