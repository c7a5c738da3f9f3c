"""Where a test finds the repository's files, whatever folder the test is in."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]   # the repository
FIXTURES = ROOT / "tests" / "fixtures"
RESULTS = ROOT / "results"                   # the committed campaigns
