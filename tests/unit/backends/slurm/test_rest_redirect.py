"""A redirect from slurmrestd's address never carries the JWT anywhere: two real HTTP servers on
127.0.0.1, the first answering every request with a redirect to the second, and the real RestClient on a
real requests session. requests strips only `Authorization` on a redirect to another host, so the
X-SLURM-USER-TOKEN header went along to whatever host Location named."""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from harness.backends.slurm.rest import RestClient, RestError

TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdW4iOiJwb2MifQ.c2lnbmF0dXJl"


class Server:
    """An HTTP server on 127.0.0.1 that records each request's method, path and headers."""

    def __init__(self, answer):
        seen = self.seen = []

        class Handler(BaseHTTPRequestHandler):
            def _any(self):
                seen.append((self.command, self.path, dict(self.headers)))
                status, headers, body = answer(self)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _any

            def log_message(self, *_a):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def servers(monkeypatch):
    # a proxy from the environment would make this a test of the proxy: the requests go straight to loopback
    for var in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    elsewhere = Server(lambda h: (200, {"Content-Type": "application/json"}, b'{"pings": [], "errors": []}'))
    status = {"code": 302}
    front = Server(lambda h: (status["code"], {"Location": f"{elsewhere.url}/collect{h.path}?state=s3cr3t"}, b""))
    yield front, elsewhere, status
    front.close()
    elsewhere.close()


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_a_redirect_is_an_error_naming_the_location_and_the_token_goes_nowhere_else(servers, code):
    front, elsewhere, status = servers
    status["code"] = code
    c = RestClient(front.url, "poc", TOKEN, "$SLURM_JWT", api_version="v0.0.42", retries=0)
    with pytest.raises(RestError) as e:
        c.request("GET", "/slurm/v0.0.42/ping/")
    assert e.value.status == code
    assert e.value.message == (f"GET {front.url}/slurm/v0.0.42/ping/: HTTP {code}, a redirect: not followed, so the "
                               "token was not sent on")
    assert f"(Location: {elsewhere.url}/collect/slurm/v0.0.42/ping/ (its query left out))" in e.value.tip
    assert "s3cr3t" not in e.value.tip and TOKEN not in e.value.message + e.value.tip
    assert elsewhere.seen == []                                     # nothing was sent on, token or not
    assert len(front.seen) == 1 and front.seen[0][2]["X-SLURM-USER-TOKEN"] == TOKEN   # the configured URL only


def test_a_post_is_not_redirected_either(servers):
    front, elsewhere, _ = servers
    c = RestClient(front.url, "poc", TOKEN, api_version="v0.0.42", retries=0)
    with pytest.raises(RestError, match="HTTP 302, a redirect"):
        c.request("POST", "/slurm/v0.0.42/job/submit", body={"script": "#!/bin/bash\ntrue\n"})
    assert elsewhere.seen == [] and [m for m, _, _ in front.seen] == ["POST"]


def test_without_a_redirect_the_answer_is_read(servers):
    _, elsewhere, _ = servers
    c = RestClient(elsewhere.url, "poc", TOKEN, api_version="v0.0.42", retries=0)
    status, _, doc = c.request("GET", "/slurm/v0.0.42/ping/")
    assert status == 200 and doc == {"pings": [], "errors": []}
    assert elsewhere.seen[0][2]["X-SLURM-USER-NAME"] == "poc"
