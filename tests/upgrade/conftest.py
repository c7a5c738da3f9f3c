"""The version-upgrade drill tests share the integration tests' helpers (tests/integration/_*.py)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "integration"))
