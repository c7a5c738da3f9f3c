"""harness/redact.py: no planted secret survives, at any depth, in any of the shapes a scheduler returns it;
clean evidence passes through untouched."""
import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.paths import FIXTURES

from harness import evidence
from harness.redact import NOWHERE, REDACTED, scrub, scrub_text

# Keys and strings that can never spell a secret word (no b, d, h, k, p, s, j, no "=" or ":"),
# so that whatever the scrubber removes from a generated document was planted.
SAFE = "acefgilmnoqrtuvwxyz"
safe_keys = st.text(alphabet=SAFE, min_size=1, max_size=8)
safe_text = st.text(alphabet=SAFE + "0123456789 ", max_size=20)
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | safe_text
safe_json = st.recursive(scalars,
                         lambda kids: st.lists(kids, max_size=4) | st.dictionaries(safe_keys, kids, max_size=4),
                         max_leaves=20)
markers = st.from_regex(r"zz9[0-9a-f]{8,16}", fullmatch=True)


PRETTY_HEADER = '{\n  "alg": "HS256",\n  "typ": "JWT"\n}'
SPACED_HEADER = '{ "typ": "JWT", "alg": "none" }'


def _pem(m):
    return f"-----BEGIN RSA PRIVATE KEY-----\nMIIE{m}\n-----END RSA PRIVATE KEY-----\n"


# Every shape a credential arrives in: (what it is, value holding the marker m)
CARRIERS = [
    ("token key", lambda m: {"token": m}),
    ("password key", lambda m: {"password": m}),
    ("camel-case secret key", lambda m: {"clientSecret": m}),
    ("kubeconfig client-key-data", lambda m: {"client-key-data": m}),
    ("kubeconfig certificate-authority-data", lambda m: {"certificate-authority-data": m}),
    ("authorization header", lambda m: {"headers": {"Authorization": f"Bearer {m}"}}),
    ("private key key", lambda m: {"private_key": m}),
    ("api key as a number", lambda m: {"apiKey": int("9" + "".join(c for c in m if c.isdigit()))}),
    ("secret under a nested dict", lambda m: {"aws": {"secret_access_key": {"v": m}}}),
    ("k8s env pair", lambda m: {"env": [{"name": "HF_TOKEN", "value": m}, {"name": "NCCL_DEBUG", "value": "INFO"}]}),
    ("env dict", lambda m: {"Env": {"AWS_SECRET_ACCESS_KEY": m, "PATH": "/usr/bin"}}),
    ("env line in a script", lambda m: {"script": f"#!/bin/bash\nexport DB_PASSWORD={m}\nsrun python x.py\n"}),
    ("NAME=value list (sacct job_env)", lambda m: {"environment": ["HOME=/root", f"GITHUB_TOKEN={m}"]}),
    ("PEM in a value", lambda m: {"ssh": _pem(m)}),
    ("PEM in a list", lambda m: ["x", _pem(m)]),
    ("base64 PEM", lambda m: {"cfg": base64.b64encode(_pem(m).encode()).decode()}),
    ("JWT in a message", lambda m: {"message": f"401 for eyJhbGciOiJSUzI1NiJ9.eyJ{m}.{m}x retrying"}),
    ("bearer in a log line", lambda m: f"curl -H 'authorization: bearer {m}' https://api"),
    ("basic auth", lambda m: {"note": f"sent Basic {m} upstream"}),
    ("kubeconfig user", lambda m: {"users": [{"name": "admin", "user": {"exec": {"args": ["--x", m]}}}]}),
    ("Secret object", lambda m: {"kind": "Secret", "metadata": {"name": "s"}, "data": {"cfg": m}}),
    ("managedFields", lambda m: {"metadata": {"managedFields": [{"fieldsV1": {f"f:{m}": {}}}]}}),
    ("last-applied", lambda m: {"metadata": {"annotations": {
        "kubectl.kubernetes.io/last-applied-configuration": json.dumps({"spec": {"x": m}})}}}),
    ("JSON text (sacct --json kept as a string)", lambda m: json.dumps({"jobs": [{"password": m, "time": 5}]})),
    ("argv pair in a list", lambda m: {"args": ["python", "x.py", "--token", m, "--steps", "5"]}),
    ("argv pair, password", lambda m: ["--password", m]),
    ("argv pair in a command line", lambda m: f"torchrun x.py --api-key {m} --steps 5"),
    ("argv --password=X", lambda m: {"cmd": f"tool --password={m} --verbose"}),
    ("argv quoted", lambda m: f"login --auth-token '{m}' now"),
    ("URL with user:password", lambda m: {"url": f"https://alice:{m}@registry.example.org/v2/"}),
    ("URL with a token as the user", lambda m: f"git clone https://{m}abcdef012345@github.com/o/r.git"),
    ("pre-signed S3 URL", lambda m: {"ckpt": "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256"
                                              f"&X-Amz-Signature={m}&X-Amz-Expires=60"}),
    ("SAS URL sig=", lambda m: f"GET https://acct.blob.core.windows.net/c/b?sv=2020-08-04&sig={m} 403"),
    ("URL ?token=", lambda m: {"message": f"fetch https://h.example/x?token={m}&v=1 failed"}),
    ("Authorization: Token X", lambda m: f"Authorization: Token {m}"),
    ("Authorization in a header dump", lambda m: f'headers={{"Authorization": "Token {m}", "Accept": "*/*"}}'),
    ("Authorization: Bearer in a dict value", lambda m: {"msg": f"authorization=Bearer {m}"}),
    ("X-SLURM-USER-TOKEN header", lambda m: f"X-SLURM-USER-TOKEN: {m}"),
    ("Docker auths", lambda m: {"auths": {"registry.example.org": {"auth": m, "email": "a@b.c"}}}),
    ("Docker config as JSON text", lambda m: json.dumps({"auths": {"ghcr.io": {"auth": m}}})),
    ("JWT with a pretty-printed header", lambda m: f"jwt {_b64(PRETTY_HEADER)}.{_b64(m)}.{m}"),
    ("JWT with spaces in its header", lambda m: f"{_b64(SPACED_HEADER)}.{_b64(m)}.x"),
    ("token in a URL fragment", lambda m: f"redirect to https://app.example/cb#access_token={m}&state=1"),
    ("Hugging Face token in a log", lambda m: f"login with hf_{m}{'A' * 20} ok"),
    ("GitHub token in a clone line", lambda m: f"using ghp_{m}{'B' * 26}"),
    ("Authorization: Digest", lambda m: f'Authorization: Digest username="u", response="{m}"'),
    ("headers as a list of pairs", lambda m: {"headers": [["Accept", "*/*"], ["Authorization", f"Token {m}"]]}),
    ("headers in a Python repr", lambda m: f"{{'Authorization': 'Token {m}', 'Accept': '*/*'}}"),
    ("env pair DB_PASS", lambda m: {"env": [{"name": "DB_PASS", "value": m}]}),
    ("curl -u", lambda m: f"curl -sf -u admin:{m} https://h.example/api"),
    ("sshpass -p", lambda m: f"sshpass -p {m} ssh login1"),
    (".netrc line", lambda m: f"machine h.example login alice password {m}"),
    ("argv pair as bytes", lambda m: [b"--token", m.encode()]),
    ("bytes value", lambda m: {"stdout": f"export API_TOKEN={m}\n".encode()}),
    ("bytes with a bearer", lambda m: [b"ok", f"Authorization: Bearer {m}".encode()]),
]


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@st.composite
def planted(draw):
    """A random JSON document with one credential planted somewhere down a random path."""
    marker = draw(markers)
    name, make = draw(st.sampled_from(CARRIERS))
    doc = make(marker)
    for _ in range(draw(st.integers(0, 8))):
        if draw(st.booleans()):
            siblings = draw(st.dictionaries(safe_keys, safe_json, max_size=3))
            doc = {**siblings, draw(safe_keys): doc}
        else:
            items = draw(st.lists(safe_json, max_size=3))
            items.insert(draw(st.integers(0, len(items))), doc)
            doc = items
    return name, marker, doc


@settings(max_examples=1500, deadline=None)
@given(planted())
def test_no_planted_secret_survives_at_any_depth(case):
    name, marker, doc = case
    out = scrub(doc)
    needle = "9" + "".join(c for c in marker if c.isdigit()) if name == "api key as a number" else marker
    text = json.dumps(out.data, default=repr)
    assert needle not in text and _b64(marker) not in text, name
    assert out.removed >= 1, name


@settings(max_examples=300, deadline=None)
@given(safe_json)
def test_clean_evidence_is_untouched(doc):
    # secrets only: this machine's host name (a short word such as "vm") may be drawn as a key, and is
    # rightly replaced; test_redact_machine.py tests that part
    out = scrub(doc, NOWHERE)
    assert out.data == doc and out.removed == 0


@settings(max_examples=200, deadline=None)
@given(planted())
def test_scrubbing_is_idempotent(case):
    _, _, doc = case
    once = scrub(doc)
    twice = scrub(once.data)
    assert twice.data == once.data and twice.removed == 0


def test_what_the_time_stamps_need_is_kept():
    """A Pod, an Event and a sacct job as the backends keep them: every time, name and state survives;
    references to secrets (names, not contents) and flags stay readable."""
    pod = {"kind": "Pod", "metadata": {"name": "p-0", "creationTimestamp": "2026-12-02T10:00:00Z",
                                       "managedFields": [{"manager": "kube-scheduler"}],
                                       "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}",
                                                       "poc/run-id": "k8s-clean-01"}},
           "spec": {"nodeName": "node-1", "automountServiceAccountToken": False,
                    "containers": [{"name": "w", "env": [
                        {"name": "NCCL_DEBUG", "value": "INFO"},
                        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}]}],
                    "volumes": [{"name": "v", "secret": {"secretName": "hf"}}],
                    "imagePullSecrets": [{"name": "regcred"}]},
           "status": {"conditions": [{"type": "PodScheduled", "status": "True",
                                      "lastTransitionTime": "2026-12-02T10:00:01Z"}]}}
    event = {"kind": "Event", "reason": "Scheduled", "eventTime": "2026-12-02T10:00:01.123456Z",
             "message": "Successfully assigned default/p-0 to node-1"}
    job = {"job_id": 42, "state": {"current": ["COMPLETED"]}, "wckey": {"wckey": "", "flags": []},
           "time": {"submission": 1796230186, "start": 1796230187, "end": 1796230200}, "nodes": "c[1-2]"}
    out = scrub({"pod": pod, "event": event, "sacct": {"jobs": [job]}})
    assert out.data["event"] == event and out.data["sacct"]["jobs"][0] == job
    p = out.data["pod"]
    assert p["metadata"]["creationTimestamp"] == "2026-12-02T10:00:00Z" and p["spec"]["nodeName"] == "node-1"
    assert p["status"] == pod["status"] and p["metadata"]["annotations"]["poc/run-id"] == "k8s-clean-01"
    assert p["spec"]["automountServiceAccountToken"] is False
    assert p["spec"]["containers"][0]["env"] == pod["spec"]["containers"][0]["env"]  # a reference, not a secret
    assert p["spec"]["volumes"][0]["secret"] == REDACTED  # over-cautious (a name, not contents), and harmless
    assert p["metadata"]["managedFields"] == REDACTED
    assert p["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] == REDACTED
    assert out.summary()["by_rule"] == {"last_applied": 1, "managed_fields": 1, "secret_key": 2}


def test_a_whole_kubeconfig():
    kc = {"apiVersion": "v1", "kind": "Config", "current-context": "poc",
          "clusters": [{"name": "poc", "cluster": {"server": "https://127.0.0.1:6443",
                                                   "certificate-authority-data": "LS0tLS1CRUdJTiBDRVJU"}}],
          "contexts": [{"name": "poc", "context": {"cluster": "poc", "user": "admin"}}],
          "users": [{"name": "admin", "user": {"client-certificate-data": "Y2VydA==", "client-key-data": "a2V5",
                                               "token": "abc"}}]}
    out = scrub(kc)
    assert out.data["users"] == [{"name": "admin", "user": REDACTED}]
    assert out.data["clusters"][0]["cluster"] == {"server": "https://127.0.0.1:6443",
                                                  "certificate-authority-data": REDACTED}
    assert out.data["contexts"] == kc["contexts"]


def test_json_text_is_left_byte_for_byte_when_clean():
    text = '{"jobs": [ {"time": {"start": 1796230187.5}} ]}'
    assert scrub({"sacct": text}).data == {"sacct": text}
    dirty = scrub({"sacct": '{"jobs": [{"time": {"start": 1796230187.5}, "token": "t"}]}'})
    assert json.loads(dirty.data["sacct"]) == {"jobs": [{"time": {"start": 1796230187.5}, "token": REDACTED}]}


FIX = FIXTURES
RECORDED_RAW = ([("local", p) for p in sorted((FIX / "local-evidence").glob("*.raw.json"))]
                + [("k8s", p) for p in sorted((FIX / "k8s" / "recorded").glob("*.raw.json"))]
                + [("slurm", p) for p in sorted((FIX / "slurm").glob("*/raw/*.json"))])


@pytest.mark.parametrize("platform,path", RECORDED_RAW, ids=lambda x: getattr(x, "name", x))
def test_redaction_never_moves_a_time_stamp(platform, path):
    """Real raw evidence of every platform: the pipeline and `poc rederive` must see the same stamps whether
    they read the raw before or after redaction (raw.json.gz holds the redacted one)."""
    raw = json.loads(path.read_text())
    cleaned = scrub(raw)
    assert evidence.to_json(evidence.stamps(platform, cleaned.data)) == evidence.to_json(evidence.stamps(platform, raw))
    assert scrub(cleaned.data).removed == 0


def test_recorded_raw_evidence_exists():
    assert {p for p, _ in RECORDED_RAW} == {"local", "k8s", "slurm"}


def test_every_carrier_is_caught_as_it_is():
    for name, make in CARRIERS:
        marker = "zz9a0b1c2d3e4f"
        out = scrub(make(marker))
        assert marker not in json.dumps(out.data, default=repr) and out.removed >= 1, name


def test_no_nesting_depth_crashes_it_and_the_secret_still_goes():
    marker = "zz9deadbeef00"
    deep: object = {"token": marker}
    for i in range(3000):
        deep = {"k": deep} if i % 2 else [deep]
    out = scrub(deep)
    assert marker not in json.dumps(out.data) and out.by_rule["too_deep"] == 1
    text = "[" * 950 + json.dumps({"password": marker}) + "]" * 950   # a JSON string nested ~950 deep
    for doc in (text, {"stdout": text}, ["x", {"raw": text}]):
        out = scrub(doc)
        assert marker not in json.dumps(out.data) and out.removed == 1


def test_deep_raw_evidence_is_stored_not_lost(tmp_path):
    from harness.store import Store, load_raw

    marker = "zz9cafe0000"
    deep: object = {"token": marker}
    for _ in range(2500):
        deep = {"k": deep}
    s = Store(tmp_path, "c")
    summary = s.write_raw("r1", {"sacct": deep, "squeue": "[" * 980 + "]" * 980})
    assert summary["removed"] >= 1 and marker not in json.dumps(load_raw(s.run_dir("r1")))


def test_urls_and_argv_without_credentials_are_left_alone():
    clean = ["https://registry.example.org/v2/torch:2.4", "ssh://git@github.com/o/r.git",
             "https://h.example/x?step=5&run=k8s-clean-01", "srun --kill-on-bad-exit=1 --nodes=2 --export=ALL",
             ["--nodes", "2", "--steps", "40"], {"auths": {}}, "eyeball.example.org is a host name, ew1.x.y too",
             "docker run --user 0:0 --env GLOO_SOCKET_IFNAME=eth0 img"]
    for doc in clean:
        assert scrub(doc).data == doc and scrub(doc).removed == 0, doc


def test_names_that_only_look_like_secrets_are_kept():
    """What the figures and a reader need, with a secret word in its name: a toleration's key, topologyKey,
    tokens_per_step (a count), token_env (where the token is), a Slurm record's empty WcKey=, a flag left false."""
    doc = {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}], "topologyKey": "kubernetes.io/hostname",
           "tokens_per_step": 32768, "metrics": {"tokens_per_s": {"value": 1.5, "lo": 1.4, "hi": 1.6}},
           "rest": {"token_env": "SLURM_JWT", "token_file": "<redacted>/jwt"}, "image_pull_secrets": [],
           "MAX_TOKENS": 4096, "PWD": "/shared/poc", "slurm_settings": {"AuthInfo": "cred_expire=10",
                                                                        "AuthType": "auth/munge"}}
    assert scrub(doc, NOWHERE).data == doc and scrub(doc, NOWHERE).removed == 0
    texts = ["            - key: node.kubernetes.io/not-ready\n                  topologyKey: kubernetes.io/hostname\n",
             '"tokens_per_step": args.batch * dims["seq_len"]}}', "d = min((low, high), key=lambda c: abs(c))",
             "JobId=4 UserId=root(0) WcKey= Cluster=emulated SubmitTime=2026-12-07T02:08:57",
             "automountServiceAccountToken: false", "a basic setup and bearer service", "bypass: on",
             "-v $STATE_DIR/slurm/secrets/db.pass:/run/poc-secrets/db.pass:ro", "mkdir -p /shared/poc/r1",
             "ssh -p 34723 poc@127.0.0.1", "mysql -h slurmdbd -P 3306 --protocol tcp"]
    for text in texts:
        assert scrub_text(text, NOWHERE).data == text, text


REVIEW_MISSED = {   # shapes the review found surviving everywhere, as each appears in a command line or log
    "gcp api key": "curl https://maps.example/api?ll=1 -H 'X-Goog: AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW'",
    "gitlab runner token": "gitlab-runner register --url https://gl --registration glrt-t1_ab12CD34ef56GH78ij90",
    "stripe": "charge with sk_live_51H8xYzAbCdEfGhIjKlMnOpQr now",
    "pypi": "twine upload -p pypi-AgEIcHlwaS5vcmcCJDEyMzQ1Njc4LTkwYWItY2RlZi0xMjM0LTU2Nzg5MGFiY2RlZgACKlszLCJh",
    "vault": "VAULT_ADDR=https://v export hvs.CAESIJx7Yq3nL0pQ8rS2tU4vW6xY8zA1bC3dE5fG7hI9jK1lM3nO5pQ",
    "google refresh": "refreshing with 1//0gAbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_AbCd",
    "telegram": "GET https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0/sendMessage",
    "age": "AGE-SECRET-KEY-1QQPZRY9X8GF2TVDW0S3JN54KHCE6MUA7LQPZRY9X8GF2TVDW0S3JN54KHCE6MU",
    "mysql -pX": "mysql -u slurm -pS3cretPw0rd -h slurmdbd slurm_acct_db",
    "mysql -p X": "mysqldump -u root -p S3cretPw0rd slurm_acct_db",
    "pass:X": "openssl enc -aes-256-cbc -pass pass:S3cretPw0rd -in a -out b",
    "sshpass -p after options": "sshpass -e -v -p S3cretPw0rd ssh poc@login1",
}


@pytest.mark.parametrize("name", list(REVIEW_MISSED))
def test_the_shapes_the_review_found_missed_are_caught(name):
    text = REVIEW_MISSED[name]
    out = scrub_text(text, NOWHERE)
    secret = {"mysql -pX": "S3cretPw0rd", "mysql -p X": "S3cretPw0rd", "pass:X": "S3cretPw0rd",
              "sshpass -p after options": "S3cretPw0rd"}.get(name)
    assert out.removed >= 1, (name, out.data)
    if secret:
        assert secret not in out.data, out.data


def test_a_password_argument_in_an_argv_list_needs_its_tool():
    assert scrub(["mysql", "-u", "root", "-pS3cret", "db"], NOWHERE).data == ["mysql", "-u", "root", "-p" + REDACTED,
                                                                              "db"]
    assert scrub(["/usr/bin/sshpass", "-p", "S3cret", "ssh", "h"], NOWHERE).data[2] == REDACTED
    assert scrub(["redis-cli", "-a", "S3cret", "ping"], NOWHERE).data[2] == REDACTED
    for argv in (["mkdir", "-p", "/shared/poc"], ["ssh", "-p", "22", "h"], ["docker", "run", "-p", "8080:80", "img"]):
        assert scrub(argv, NOWHERE).data == argv, argv


def test_credentials_in_json_quoted_inside_a_message():
    text = ('sbatch: error: {"script": "#!/bin/bash\\nmysql -u slurm -pS3cretPw0rd\\n", '
            '"env": {\\"auths\\": {\\"r\\": {\\"auth\\": \\"ZGVwbG95OlMzY3JldA==\\"}}}, '
            '"args": ["--api-key", "S3cretApiKey99"]}')
    out = scrub_text(text, NOWHERE).data
    assert "S3cretPw0rd" not in out and "ZGVwbG95OlMzY3JldA" not in out and "S3cretApiKey99" not in out, out


def test_a_pem_block_in_a_log_goes_alone():
    text = ("loaded key\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
            "-----END OPENSSH PRIVATE KEY-----\nstep 5\n")
    out = scrub_text(text, NOWHERE)
    assert out.data == "loaded key\n<redacted>\nstep 5\n" and out.by_rule == {"pem": 1}
