"""report.html in a real browser (Debian's headless Chromium): every chart loads, nothing logs an error."""
import shutil
from pathlib import Path

import pytest

from harness.report.document import build

pytestmark = pytest.mark.integration
# the committed smoke campaign: every platform, faults and contention, so every chart has data
STORED = Path(__file__).parents[2] / "results" / "smoke-2026-12-02"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def test_report_html_in_chromium(tmp_path):
    playwright = pytest.importorskip("playwright.sync_api", reason="pip install .[dev] brings playwright")
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is not installed: scripts/setup.sh installs Debian's chromium")
    paths = build(str(STORED), str(tmp_path / "report"))
    charts = sorted(k for k in paths if k.startswith("charts/"))
    problems: list[str] = []

    def on_console(m):
        if m.type in ("error", "warning"):
            problems.append(f"console {m.type}: {m.text}")

    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("console", on_console)
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
        page.goto(paths["report.html"].resolve().as_uri())
        page.wait_for_load_state("load")
        images = page.eval_on_selector_all(
            "img", "els => els.map(e => [e.alt, e.complete, e.naturalWidth, e.naturalHeight])")
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        shot_dir = Path(__file__).parents[2] / "results" / "_scratch"
        shot_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy(tmp_path / "report.png", shot_dir / "report-screenshot.png")
        title = page.title()
        headline_rows = page.eval_on_selector_all("table tr", "rows => rows.length")
        browser.close()
    assert title == "Kubernetes vs Slurm report"
    assert len(images) == len(charts) == 6, (images, charts)
    for alt, complete, w, h in images:
        assert complete and w > 300 and h > 200, f"chart {alt!r} did not load ({w}x{h})"
    assert headline_rows > 15   # 20 metrics across local, Slurm and Kubernetes
    assert problems == []
    assert (tmp_path / "report.png").stat().st_size > 50_000
