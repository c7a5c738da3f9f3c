"""A fake API server at the HTTP level for the official kubernetes client, whichever major version.

Client 36 and later call ``rest_client.request(method, url, ...)`` and check the status themselves;
client 35 and earlier call ``rest_client.GET(url, ...)`` (POST, PUT, ...) and expect the REST client to
raise ApiException on a status outside 2xx. A fake defines ``request`` and inherits the rest."""
from __future__ import annotations

from urllib.parse import urlencode

from kubernetes.client import rest


class ByMethod:
    def _call(self, method: str, url: str, **kw):
        if query := kw.pop("query_params", None):     # 36+ puts them in the URL itself
            url = f"{url}?{urlencode(query)}"
        resp = self.request(method, url, **kw)
        if not 200 <= resp.status <= 299:
            raise rest.ApiException(http_resp=resp)
        return resp

    def GET(self, url, **kw):
        return self._call("GET", url, **kw)

    def HEAD(self, url, **kw):
        return self._call("HEAD", url, **kw)

    def OPTIONS(self, url, **kw):
        return self._call("OPTIONS", url, **kw)

    def DELETE(self, url, **kw):
        return self._call("DELETE", url, **kw)

    def POST(self, url, **kw):
        return self._call("POST", url, **kw)

    def PUT(self, url, **kw):
        return self._call("PUT", url, **kw)

    def PATCH(self, url, **kw):
        return self._call("PATCH", url, **kw)


class Headers:
    """A fake urllib3 response's headers in both clients' ways: ``headers`` (36+) and getheader(s) (35)."""
    headers: dict

    def getheaders(self):
        return self.headers

    def getheader(self, name, default=None):
        return self.headers.get(name, default)
