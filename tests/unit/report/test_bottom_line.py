"""The report leads with its answer: the bottom line (what separates the platforms, what does not, the runs
a platform the next campaign needs), then tables whose cells say why an interval and a verdict differ, with
placeholders flagged, the transport named as recorded, and no Python reprs."""
import math
import re

import pytest
from PIL import Image
from support.paths import RESULTS
from support.report_rows import criteria, lines, section

from harness.report import bottom_line, power
from harness.report.charts import size_label
from harness.report.compare import Comparison
from harness.report.document import build, settings_blocks


@pytest.fixture(scope="module")
def ux(tmp_path_factory):
    paths = build(str(RESULTS / "smoke-2026-12-03-ux-audit"), str(tmp_path_factory.mktemp("rep")))
    return paths, paths["report.md"].read_text()


def test_the_bottom_line_comes_first_and_cites_the_one_verdict(ux):
    _, md = ux
    assert re.findall(r"^## .*$", md, re.M)[:2] == ["## Bottom line", "## Decision summary: Kubernetes or Slurm "
                                                                     "for this job"]
    opening = section(md, "Bottom line").split("\n\n")
    # the host's load first: these runs predate its sampling
    assert opening[1] == ("**Host load**: not recorded (these runs predate its sampling): a busy host cannot be ruled "
                          "out.")
    # a verdict on a row whose platforms ran under unequal conditions says so where the opening cites it
    assert opening[2] == ("Slurm is ahead on startup: `startup_s` Kubernetes 6.58 vs Slurm 5.66 s, Kubernetes / Slurm "
                          "×1.15 (90% CI 1.09–1.22), Holm p 0.0015 (under unequal conditions: CPU cap, memory cap; "
                          "see its row).")
    # some of Slurm's queues lie within their ± of 0: tested on differences in seconds, which separate the rounds
    assert opening[3] == ("Kubernetes is ahead on queue: `queue_s` Kubernetes 0.219 vs Slurm 0.639 s, Kubernetes / "
                          "Slurm ×0.34, Holm p 0.041.")
    # equivalence with each metric's own margin, Holm-adjusted in the same family as the differences
    assert opening[4].startswith("They are equivalent on submit → first step (within ×1.25), user experience (within "
                                 "×1.5), cost (within ×1.1; priced at the placeholder 1 USD per unit-hour on both); "
                                 "undecided on all-reduce bus bandwidth (×0.99, Holm p 1), recovery (")
    assert "Prefer" not in md and "…" not in section(md, "Bottom line")


def test_the_next_runs_are_counted_from_the_spread_seen(ux):
    _, md = ux
    opening = section(md, "Bottom line")
    assert ("- all-reduce bus bandwidth: `allreduce_avg_busbw_gbps` (mean ratio ×0.97 over 13 rounds, sd of the "
            "log-ratio 0.13): 237 rounds to resolve a difference that size, or 55 to show equivalence within ×1.1") \
        in opening
    # 237 is power.n_difference at Holm's strictest step over the campaign's 6 primary questions
    assert 220 <= power.n_difference(math.log(0.97), 0.13, alpha=0.05 / 6) <= 250   # 0.97 and 0.13 are rounded
    assert "- recovery: `recovery_free_s:lose_node`: 1 run a side shows no spread to project from; run at least 8 " \
           "rounds" in opening
    assert ("α = 0.0083 (= 0.05 / 6, Holm's strictest step over the 6 Kubernetes-vs-Slurm questions), power 80%"
            in opening)


def _comp(verdict, tested=True, **kw):
    base = dict(metric="queue_s", numerator="k8s", denominator="slurm", unit="s", n_num=3, n_den=3, median_num=1.0,
                median_den=2.0, ratio=0.5, ci_low=math.nan, ci_high=math.nan, resolution=0.01, family="primary",
                test="paired" if tested else "", n_pairs=0, n_higher=0, p=0.5 if tested else math.nan,
                p_holm=0.5 if tested else math.nan, effect=math.nan, eq_low=math.nan, eq_high=math.nan,
                refused=None, warning=None, verdict=verdict)
    return Comparison(**{**base, **kw})


def test_a_next_run_line_reads_the_spread_it_was_given():
    c = _comp("few")
    paired = bottom_line.Spread(math.log(0.5), 1.0, 3, True)
    # ln 0.5 = -0.693147: ((1.959964 + 0.841621) / 0.693147)^2 × π/3 = 17.11 -> 18
    assert bottom_line.next_run(c, paired) == ("`queue_s` (mean ratio ×0.50 over 3 rounds, sd of the log-ratio 1.00): "
                                               "18 rounds to resolve a difference that size (equivalence within ×1.5 "
                                               "out of reach at that ratio)")
    assert bottom_line.next_run(c, None).startswith("`queue_s`: 3 runs a side show no spread to project from")
    close = bottom_line.Spread(0.001, 0.1, 4, True)
    assert bottom_line.next_run(c, close).endswith(": over 1,000 rounds: a difference that small, or 6 to show "
                                                   "equivalence within ×1.5")


def test_a_campaign_that_tested_nothing_says_so_plainly(tmp_path):
    md = build(str(RESULTS / "serve-2026-12-04"), str(tmp_path / "rep"))["report.md"].read_text()
    opening = section(md, "Bottom line")
    assert ("Nothing separates Kubernetes and Slurm in this campaign, and it could not: no criterion has the 5 runs "
            "a side a test needs.") in opening
    assert ("Described without a test: auditing, inference; not measured: recovery, contention, queue at scale, "
            "upgrades, cost.") in opening


def test_an_interval_and_a_verdict_that_disagree_say_why_in_the_same_cell(ux):
    _, md = ux
    rows = criteria(md)
    assert rows["startup"][1].startswith("1.16 (0.97–1.33); includes 1, yet a verdict: the within-round test "
                                         "(Holm p 0.0015)")


def test_placeholders_and_the_transport_are_named(ux):
    _, md = ux
    rows = criteria(md)
    assert "priced at the placeholder 1 USD per unit-hour (set `pricing.slurm.usd_per_hour`, " \
           "`pricing.k8s.usd_per_hour`)" in rows["cost"][0]
    assert "placeholder: the default 1 USD per unit-hour" in section(md, "Cost and goodput")
    assert "(gloo over TCP, as recorded)" in rows["all-reduce bus bandwidth"][0]
    assert "NCCL (" not in md and "figures are gloo over TCP on loopback" in section(md, "Caveats")


def test_the_opening_flags_a_placeholder_price_only_where_one_is_left():
    """The bottom line is all some readers see: "cost" there says when it is the placeholder's, per platform."""
    from types import SimpleNamespace

    placeholder, real = {"usd_per_unit_hour": 1.0, "price_set": None}, {"usd_per_unit_hour": 2.4, "price_set": None}
    flag = bottom_line.placeholder_flag
    assert flag(SimpleNamespace(pricing={"slurm": placeholder, "k8s": placeholder, "local": real})) == \
        "priced at the placeholder 1 USD per unit-hour on both"
    assert flag(SimpleNamespace(pricing={"slurm": real, "k8s": {"pricing": placeholder}})) == \
        "priced at the placeholder 1 USD per unit-hour on Kubernetes"
    assert flag(SimpleNamespace(pricing={"slurm": real, "k8s": real, "local": placeholder})) == ""


def test_long_cells_are_split_and_the_headline_is_grouped(ux):
    _, md = ux
    assert max(len(c[1]) for c in lines(md)) < 400   # the user-experience cell was ~900 characters
    assert sum(1 for c in lines(md) if c[1].startswith("`") and c[0] == "") >= 5   # a line per probe mistake
    head = section(md, "Headline")
    assert head.splitlines()[2].startswith("| criterion | metric (unit) |")
    assert "± <" not in head and "<details><summary>" in head
    main, folded = head.split("<details>")
    assert "`queue_s:contention`" in folded and "`queue_s:contention`" not in main


def test_the_appendix_has_no_python_reprs_and_no_heading_twice(ux, tmp_path):
    _, md = ux
    assert "{'" not in md and "[{'" not in md
    assert len(re.findall(r"^#+ Recovery broken down$", md, re.M)) == 1
    drills = build(str(RESULTS / "drills-2026-12-03"), str(tmp_path / "d"))["report.md"].read_text()
    assert "{'" not in drills and "```yaml\nslurm_settings:\n  SLURM_VERSION: 24.11.5" in drills
    blocks = settings_blocks("Slurm", {"a": 1, "nodes": [{"node": "c1"}], "none": None})
    assert blocks == [("h3", "Slurm"), ("ul", ["`a`: 1", "`none`: –"]), ("pre", "nodes:\n- node: c1")]


def test_charts_are_readable_sizes(ux):
    paths, _ = ux
    with Image.open(paths["charts/metrics.png"]) as im:
        w, h = im.size
    assert w <= 1600 and 0.4 <= h / w <= 1.0, (w, h)
    assert [size_label(x) for x in (512, 1024, 4096, 2 ** 24, 2 ** 30, 1536)] == \
        ["512 B", "1 KiB", "4 KiB", "16 MiB", "1 GiB", "1.5 KiB"]


@pytest.mark.parametrize("key, criterion", [
    ("queue_s", "queue"), ("queue_s:contention", "contention"), ("handover_s", "contention"),
    ("submit_to_first_step_s", "startup"), ("cost_per_step_usd:kill_rank", "recovery"), ("goodput", "cost"),
    ("allreduce_avg_busbw_gbps", "all-reduce and steps"), ("first_log_s", "user experience")])
def test_each_headline_metric_is_grouped_under_its_criterion(key, criterion):
    from harness.report.headline import criterion_of
    assert criterion_of(key) == criterion
