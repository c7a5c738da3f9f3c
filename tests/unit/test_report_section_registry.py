"""The report's sections come from one ordered registry: the report shows them in its order, leaves out
those that do not apply (heading included), and shows a section added to the list where it was added.
Scenario sections apply exactly when the campaign holds that scenario's runs."""
import inspect
import json
import re
from pathlib import Path

import pytest

from harness.report import defaults as defaultsmod
from harness.report import drills as drillmod
from harness.report import serving as servemod
from harness.report.document import build
from harness.report.registry import REGISTRY
from harness.report.section import Section

RESULTS = Path(__file__).parents[2] / "results"
SERVE = RESULTS / "serve-2026-12-04"   # the smallest committed campaign: two runs
TITLES = [s.title for s in REGISTRY]


def headings(md: str) -> list[str]:
    return re.findall(r"^## (.+)$", md, flags=re.M)


def test_titles_are_unique_so_each_names_one_place_in_the_report():
    assert len(TITLES) == len(set(TITLES))


def test_the_document_shows_the_registry_unless_given_another_list():
    assert inspect.signature(build).parameters["sections"].default is REGISTRY


def test_a_section_added_to_the_list_shows_at_its_place_and_one_that_does_not_apply_shows_nothing(tmp_path):
    seen = []
    shown = Section("Toy section", lambda ctx: [("p", f"toy paragraph over {len(ctx.serves)} serve runs"),
                                                ("ul", ["toy item"])])
    hidden = Section("Hidden toy", lambda ctx: [("p", "never rendered")],
                     applies=lambda ctx: seen.append(ctx.results_dir) or False)
    sections = [*REGISTRY[:3], shown, hidden, *REGISTRY[3:]]
    paths = build(str(SERVE), str(tmp_path / "report"), sections=sections)
    md, page = paths["report.md"].read_text(), paths["report.html"].read_text()

    got = headings(md)
    at = got.index("Toy section")
    assert got[at - 1] == REGISTRY[2].title and got[at + 1] == REGISTRY[3].title
    assert "## Toy section\n\ntoy paragraph over 2 serve runs\n\n- toy item\n" in md
    assert "<h2>Toy section</h2>\n<p>toy paragraph over 2 serve runs</p>\n<ul><li>toy item</li></ul>" in page
    assert seen == [str(SERVE)]   # it was asked, and said no
    assert "Hidden toy" not in md and "never rendered" not in md
    assert "Hidden toy" not in page and "never rendered" not in page


def test_an_empty_list_leaves_only_the_title_and_the_intro(tmp_path):
    paths = build(str(SERVE), str(tmp_path / "report"), sections=[])
    md = paths["report.md"].read_text()
    assert headings(md) == [] and md.startswith("# Kubernetes vs Slurm: DDP benchmark report\n\nCampaign(s): ")
    assert paths["summary.csv"].exists() and paths["comparisons.csv"].exists()


def _records(campaign: Path) -> list[dict]:
    return [json.loads(line) for f in sorted(campaign.glob("*/runs.jsonl"))
            for line in f.read_text().splitlines() if line.strip()]


def _holds(records: list[dict]) -> dict[str, bool]:
    """Each scenario section's title -> whether the campaign's records hold its runs, read from the
    records themselves rather than from the report's tables."""
    scenarios = {r.get("scenario") for r in records}
    faults = [r for r in records if r.get("scenario") in ("kill_rank", "lose_node")]
    return {
        servemod.TITLE: "serve" in scenarios,
        drillmod.TITLE: any(str(s).startswith("drill:") for s in scenarios),
        "User experience": any(r.get("ux") for r in records) or "mistake" in scenarios,
        "Auditing": any(r.get("audit") for r in records),
        # older campaigns' fault runs predate the recovery phases: no breakdown to show
        "Recovery broken down": any("recovery_detection_s" in r["metrics"] for r in faults),
        defaultsmod.TITLE: bool(faults),
    }


# between them, each scenario section both applies and does not
CAMPAIGNS = ["smoke-2026-12-02", "smoke-2026-12-03-ux-audit", "drills-2026-12-03", "serve-2026-12-04",
             "serve-2026-12-06"]


@pytest.mark.parametrize("name", CAMPAIGNS)
def test_a_committed_campaign_shows_the_registry_in_order_and_its_scenarios_sections_only(tmp_path, name):
    campaign = RESULTS / name
    got = headings(build(str(campaign), str(tmp_path / "report"))["report.md"].read_text())
    assert got == [t for t in TITLES if t in got], "the report's order is the registry's"
    assert got == headings((campaign / "report" / "report.md").read_text()), "and the committed report's"
    for title, present in _holds(_records(campaign)).items():
        assert (title in got) == present, (title, present)
    for title in ("Bottom line", "Headline", "Charts", "Caveats", "Definitions"):
        assert title in got   # every campaign has these, whatever it ran


def test_between_them_the_campaigns_exercise_every_scenario_section_both_ways():
    seen: dict[str, set[bool]] = {}
    for name in CAMPAIGNS:
        for title, present in _holds(_records(RESULTS / name)).items():
            seen.setdefault(title, set()).add(present)
    assert all(both == {True, False} for both in seen.values()), seen
    assert set(seen) <= set(TITLES)
