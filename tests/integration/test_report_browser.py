"""report.html in a real browser (Debian's headless Chromium): the bottom line opens it, with the runs the
next campaign needs, all on the first screen; the decision summary follows (its user experience and auditing
rows filled from the campaign's probes and audit answers), every chart loads, the user-experience and auditing
sections render, nothing logs an error."""
import shutil
from pathlib import Path

import pytest

from harness.report.document import build

pytestmark = [pytest.mark.integration, pytest.mark.local]
# the committed UX-audit smoke campaign: every platform, faults, contention, the mistake probes and
# every run's audit answers, so every chart and every section has data
STORED = Path(__file__).parents[2] / "results" / "smoke-2026-12-03-ux-audit"
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
        page.screenshot(path=str(tmp_path / "first-screen.png"))   # what a reader sees before scrolling
        shot_dir = Path(__file__).parents[2] / "results" / "_scratch"
        shot_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy(tmp_path / "report.png", shot_dir / "report-screenshot.png")
        shutil.copy(tmp_path / "first-screen.png", shot_dir / "report-first-screen.png")
        # the opening: every paragraph and list item of the first section, and whether it ends on screen
        opening = page.evaluate("""() => {
            const h2 = document.querySelector('h2'); const out = {heading: h2.textContent, paragraphs: [],
                items: [], bottom: 0, viewport: window.innerHeight};
            for (let el = h2.nextElementSibling; el && el.tagName !== 'H2'; el = el.nextElementSibling) {
                if (el.tagName === 'P') out.paragraphs.push(el.textContent);
                if (el.tagName === 'UL') out.items.push(...[...el.querySelectorAll('li')].map(li => li.textContent));
                out.bottom = Math.max(out.bottom, el.getBoundingClientRect().bottom);
            }
            return out; }""")
        title = page.title()
        headline_rows = page.eval_on_selector_all("table tr", "rows => rows.length")
        # the first section: its heading, its table's criteria, the reading after it, its chart
        first = page.evaluate("""() => {
            const h2 = document.querySelectorAll('h2')[1]; const out = {heading: h2.textContent, criteria: [],
                ahead: {}, paragraphs: [], image: null,
                sections: [...document.querySelectorAll('h2')].map(h => h.textContent)};
            for (let el = h2.nextElementSibling; el && el.tagName !== 'H2'; el = el.nextElementSibling) {
                if (el.tagName === 'TABLE' && !out.criteria.length) {   // the summary, not the ledger after it
                    const rows = [...el.querySelectorAll('tr')].slice(1);
                    out.criteria = rows.map(r => r.cells[0].textContent);
                    for (const r of rows) out.ahead[r.cells[0].textContent] = r.cells[r.cells.length - 1].textContent;
                }
                if (el.tagName === 'P') out.paragraphs.push(el.textContent);
                if (el.tagName === 'IMG')
                    out.image = [el.alt, el.complete, el.naturalWidth, el.naturalHeight];
            }
            return out; }""")
        browser.close()
    assert title == "Kubernetes vs Slurm report"
    # the answer first: the verdict, what is open, the runs to settle it, on the first screen (1280 × 900)
    assert opening["heading"] == "Bottom line", opening
    # the host's load first (these runs predate its sampling), then the verdicts
    assert opening["paragraphs"][0].startswith("Host load: not recorded"), opening
    assert opening["paragraphs"][1].startswith(
        "Slurm is ahead on startup: startup_s Kubernetes 6.58 vs Slurm 5.66 s"), opening
    assert any(p.startswith("They are equivalent on submit → first step (within ×1.25)")
               and "undecided on all-reduce bus bandwidth" in p for p in opening["paragraphs"]), opening
    assert "To settle what is open, run next (per platform):" in opening["paragraphs"], opening
    assert any(i.startswith("all-reduce bus bandwidth: allreduce_avg_busbw_gbps (mean ratio")
               and " rounds to resolve a difference that size" in i for i in opening["items"]), opening
    assert any(p.startswith("Runs needed: normal approximation") and "power 80%" in p
               for p in opening["paragraphs"]), opening
    assert 0 < opening["bottom"] <= opening["viewport"], f"the opening ends at {opening['bottom']} px, " \
        f"below the first screen ({opening['viewport']} px)"
    assert first["heading"].startswith("Decision summary"), first
    assert [c for c in first["criteria"] if c] == ["queue", "startup", "submit → first step",
                                                   "all-reduce bus bandwidth", "recovery", "contention",
                                                   "queue at scale", "user experience", "auditing", "upgrades",
                                                   "cost", "inference"], first
    assert any(p.startswith("A hybrid costs") for p in first["paragraphs"]), first
    alt, complete, w, h = first["image"]
    assert alt == "Kubernetes / Slurm per criterion" and complete and w > 300 and h > 200, first["image"]
    # measured in this campaign: user experience (the probes, first_log_s) and auditing; not: upgrades, inference,
    # queue at scale (it holds no replays)
    assert first["ahead"]["user experience"] != "not measured" and first["ahead"]["auditing"] != "not measured"
    assert first["ahead"]["upgrades"] == first["ahead"]["inference"] == "not measured", first["ahead"]
    assert first["ahead"]["queue at scale"] == "not measured", first["ahead"]
    assert {"User experience", "Auditing"} <= set(first["sections"]), first["sections"]
    assert len(images) == len(charts) == 9, (images, charts)
    for alt, complete, w, h in images:
        assert complete and w > 300 and h > 200, f"chart {alt!r} did not load ({w}x{h})"
    assert headline_rows > 15   # 20 metrics across local, Slurm and Kubernetes
    assert problems == []
    assert (tmp_path / "report.png").stat().st_size > 50_000
    assert (tmp_path / "first-screen.png").stat().st_size > 20_000
