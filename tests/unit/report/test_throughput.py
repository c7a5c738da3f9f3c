"""The throughput chart, the sweep table and the saturation lines."""
from __future__ import annotations

import matplotlib.image as mpimg

from harness.report import throughput as rt
from harness.scale.saturation import by_platform


def row(platform, rate, offered, achieved, **extra):
    t = {"offered_jobs_per_s": offered, "jobs_per_s": achieved, "nodes_per_s": 2 * achieved,
         "lag_s": 1.0, "never_placed": 0}
    return {"platform": platform, "rate": rate, "throughput": t, **extra}


ROWS = [row("k8s", 1, 1.0, 1.0, control_plane_cpu_cores={"etcd": 0.25, "kube-apiserver": 0.5}),
        row("k8s", 2, 2.0, 1.98), row("k8s", 4, 4.0, 2.5),
        row("slurm", 1, 1.0, 1.0, control_plane_cpu_cores={"slurm container": 0.125}),
        row("slurm", 2, None, 2.0), row("slurm", 4, 4.0, 3.9)]


def test_points_take_the_recorded_offered_rate_and_fall_back_to_the_trace_rate():
    pts = rt.points(ROWS)
    assert pts["k8s"] == [(1.0, 1.0), (2.0, 1.98), (4.0, 2.5)]
    assert pts["slurm"][1] == (2, 2.0)     # no submit records: the trace's rate


def test_achieved_counts_from_the_first_placement_so_a_constant_latency_is_not_falling_behind():
    # 30 jobs offered over 30 s, each placed 4 s after it came (a 5 s scheduling pass): from the first
    # submission that is 30 / 34 = 0.88 of the offered rate; from the first placement, all of it
    late = row("slurm", 1, 1.0, 30 / 34)
    late["throughput"]["placing_jobs_per_s"] = 1.0
    assert rt.points([late]) == {"slurm": [(1.0, 1.0)]}
    assert "| Slurm | 1 | 1 | 1 | 0.882 |" in rt.table([late])[2]


def test_the_chart_is_a_png_with_something_drawn(tmp_path):
    pts = rt.points(ROWS)
    path = rt.chart(pts, tmp_path / "t.png", by_platform(pts))
    img = mpimg.imread(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert img.shape[0] > 300 and img.shape[1] > 400
    assert img[..., :3].std() > 0.05          # not a blank canvas: lines and points are drawn


def test_a_chart_with_a_zero_rate_or_no_points_still_draws(tmp_path):
    assert rt.chart({"k8s": [(1.0, 0.0), (2.0, 0.0)]}, tmp_path / "z.png").is_file()
    assert rt.chart({}, tmp_path / "e.png").is_file()


def test_lines_name_each_platforms_saturation_and_that_each_point_is_one_replay():
    text = "\n".join(rt.saturation_lines(by_platform(rt.points(ROWS))))
    assert "at least 90% of the offered rate" in text and "one replay" in text
    assert ("**Kubernetes**: saturates at 2 jobs/s offered, from 3 points (one replay each); fell behind at 4 jobs/s;"
            " most achieved 2.5 jobs/s (at 4 offered)") in text
    assert "**Slurm**: no saturation within the sweep, from 3 points (one replay each): kept up at every rate " \
           "offered: saturation is above 4 jobs/s" in text


def test_lines_with_one_point_say_there_is_no_saturation_point():
    lines = rt.saturation_lines(by_platform({"k8s": [(2.0, 2.0)]}))
    assert lines[1] == ("- **Kubernetes**: no saturation point from 1 point (one replay each): 1 usable point: "
                        "a saturation point needs at least two offered rates; most achieved 2 jobs/s (at 2 offered)")


def test_the_table_has_a_row_per_replay_with_its_costs():
    lines = rt.table(ROWS)
    assert len(lines) == 2 + len(ROWS)
    assert lines[2] == "| Kubernetes | 1 | 1 | 1 | 1 | 2 | 1 | 0 | n/a | 0.75 |"   # control plane summed
    assert lines[5] == "| Slurm | 1 | 1 | 1 | 1 | 2 | 1 | 0 | n/a | 0.12 |"
    assert "| Slurm | 2 | n/a | 2 |" in lines[6]


def sweep_row(platform, nodes, limits, repeat, rate, achieved, host=(0.5, 1.2)):
    r = row(platform, rate, float(rate), achieved, nodes=nodes, limits=limits, repeat=repeat, harness_cpu_s=1.5,
            host_cpu={"host_cpus": 2, "host": {"mean_cores": host[0], "peak_cores": host[1]},
                      "components": {"kube-apiserver": {"mean_cores": 0.3, "peak_cores": 0.9},
                                     "other": {"mean_cores": 0.4, "peak_cores": 1.0}}})
    r["offered"], r["achieved"] = rt.offered(r), rt.achieved(r)
    return r


def test_the_sweep_report_puts_the_ceilings_first_and_every_replay_with_its_host_cpu(tmp_path):
    from harness.scale import ceiling as cl
    lim = cl.DEFAULT_K8S_LIMITS
    rows = [sweep_row("k8s", 16, lim, 1, 1, 1.0), sweep_row("k8s", 16, lim, 1, 2, 1.2),
            sweep_row("k8s", 16, lim, 2, 1, 0.98), sweep_row("slurm", 16, "-", 1, 1, 1.0),
            sweep_row("slurm", 16, "-", 1, 2, 2.0), sweep_row("slurm", 64, "-", 1, 2, 2.0)]
    found = cl.ceilings(rows)
    md = rt.sweep_markdown(rows, found, {"seconds": 10.0, "runtime_s": {"16": 3}, "repeat": 2, "stop_below": 0.75})
    assert md.index("## Ceilings") < md.index("## Every replay") and "jobs of 3 s at 16 nodes, gangs" in md
    assert f"| Kubernetes | 16 | {lim} | 1 | 1.2 | 3 | 2 |" in md           # repeat 2 placed 0.98 of 1: kept up
    assert "| Slurm | 16 | - | 2+ | 2 | 2 | 1 |" in md                      # no rate missed: a lower bound
    assert "| 0.50 / 1.20 | kube-apiserver 0.30 / 0.90 | 1.50 |" in md        # the busiest named component
    png = rt.sweep_chart(rows, found, tmp_path / "sweep.png")
    img = mpimg.imread(png)
    assert img.shape[1] > 2 * img.shape[0] * 0.5 and img[..., :3].std() > 0.05   # two size columns, drawn
