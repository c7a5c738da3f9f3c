"""Shared test settings.

In CI (POC_REQUIRE_INTEGRATION=1, set by .ci/run) an integration test that skips is a failure:
the integration tests are the proof that the real clusters work, so they must run there.
"""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")  # its reaper image cannot be pulled here


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if (os.environ.get("POC_REQUIRE_INTEGRATION") == "1" and rep.skipped
            and item.get_closest_marker("integration") is not None):
        rep.outcome = "failed"
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        rep.longrepr = f"integration test skipped in CI (POC_REQUIRE_INTEGRATION=1): {reason}"
