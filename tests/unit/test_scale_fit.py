"""A scale curve's largest size against what the cluster can hold, before anything is submitted.

Slurm: preflight reads the partition's nodes (sinfo -N) and refuses a job asking for more, with ERROR/TIP
words; `poc check` also tries the largest job with sbatch --test-only. Kubernetes: the queue the harness
sets up on the local native cluster is sized to the largest job; on a user's cluster preflight refuses a
job the ClusterQueue's nominal quota cannot fit (unless it may borrow), and `poc check` checks the quota
against the largest job. The real clusters' answers: tests/integration/test_scale_curve.py."""
from __future__ import annotations

import pytest
from support.check_replay import REC, Replay, recorded

from harness import config
from harness.backends.k8s import KubernetesBackend, quota_fit
from harness.backends.slurm import SlurmBackend, partition_fit
from harness.check import slurm as chk_slurm
from harness.check.k8s import quota_fit as check_quota_fit
from harness.check.report import Failed, Runner
from harness.cli import check_cmd
from harness.errors import BackendError, CommandError, TransportError
from harness.render import jobset as rj
from harness.transports import Result

# what the local Slurm cluster's login node prints (sinfo -h -N -o '%N|%P'): three nodes, default partition debug
SINFO = "c1|debug*\nc2|debug*\nc3|debug*\n"
TWO_PARTITIONS = "c1|debug*\nc2|debug*\nc3|debug*\ng1|gpu\ng2|gpu\nc1|all\nc2|all\nc3|all\ng1|all\ng2|all\n"


class Sinfo:
    """A transport answering sinfo -N with `text` (or raising `error`), recording the argv it ran."""
    name = "sinfo"

    def __init__(self, text: str = SINFO, error: Exception | None = None):
        self.text, self.error, self.argv = text, error, []

    def run(self, argv, *, input=None, env=None, timeout=60, check=True):
        self.argv.append(list(argv))
        if self.error is not None:
            raise self.error
        return Result(tuple(argv), 0, self.text, "")


def _cfg(**over) -> config.Config:
    return config.from_mapping({"platforms": ["slurm", "k8s"], "faults": [], **over})


def test_slurm_preflight_refuses_a_size_above_the_partitions_nodes_with_what_to_do():
    with pytest.raises(BackendError) as e:
        partition_fit.check(Sinfo(), 4, None)
    assert e.value.message == ("the campaign's largest job asks for 4 nodes, but partition 'debug' has 3 (sinfo -N); "
                               "sbatch would refuse it")
    assert e.value.tip == ("lower scale.nodes' largest size (or resources.nodes) to 3 or fewer, or set "
                           "slurm.partition to one with 4 nodes or more (sinfo -s lists them)")
    assert partition_fit.check(Sinfo(), 3, None) == {"partition": "debug", "nodes": 3}


def test_slurm_the_configured_partition_is_counted_and_a_node_in_two_partitions_once():
    t = Sinfo(TWO_PARTITIONS)
    assert partition_fit.check(t, 2, "gpu") == {"partition": "gpu", "nodes": 2}
    assert t.argv == [["sinfo", "-h", "-N", "-o", "%N|%P", "-p", "gpu"]]
    assert partition_fit.check(Sinfo(TWO_PARTITIONS), 5, "all") == {"partition": "all", "nodes": 5}
    with pytest.raises(BackendError, match="partition 'gpu' has 2 \\(sinfo -N -p gpu\\)"):
        partition_fit.check(Sinfo(TWO_PARTITIONS), 3, "gpu")


@pytest.mark.parametrize("t", [Sinfo(error=TransportError("no shell")),
                               Sinfo(error=CommandError(["sinfo"], 1, "", "x")),
                               Sinfo("c1|debug\nc2|debug\n"), Sinfo("")])
def test_slurm_nothing_is_refused_where_sinfo_says_nothing_usable(t):
    """No shell (slurmrestd with a mount), a failed sinfo, or no default partition to read: sbatch has the word."""
    assert partition_fit.check(t, 64, None) is None


def test_slurm_backend_preflight_checks_the_campaigns_largest_job():
    cfg = _cfg(slurm={"transport": "ssh", "host": "login.example.org", "known_hosts": "/dev/null"},
               scale={"nodes": [2, 4]})
    assert SlurmBackend.from_config(cfg).most_nodes == 4
    assert SlurmBackend.from_config(_cfg(slurm={"transport": "ssh", "host": "login.example.org",
                                                "known_hosts": "/dev/null"})).most_nodes == 2

    class Cluster(Sinfo):
        def run(self, argv, **kw):
            if argv[:2] == ["sinfo", "--version"]:
                return Result(tuple(argv), 0, "slurm-wlm 24.11.5\n", "")
            if argv[0] == "scontrol":
                return Result(tuple(argv), 0, "ClusterName = poc\nSlurmctldHost[0] = slurmctld\n", "")
            if argv[:3] == ["sinfo", "-h", "-N"] and "%N|%P" in argv:
                return super().run(argv, **kw)
            return Result(tuple(argv), 0, "", "")

        def describe(self):
            return {"transport": "sinfo"}
    with pytest.raises(BackendError, match="asks for 4 nodes, but partition 'debug' has 3"):
        SlurmBackend(cfg.slurm, Cluster(), most_nodes=4).preflight()
    info = SlurmBackend(cfg.slurm, Cluster(), most_nodes=3).preflight()
    assert info["partition_nodes"] == {"partition": "debug", "nodes": 3}


class RefusesMoreThan3(Replay):
    """The recorded login node, whose sbatch --test-only refuses a script asking for more than 3 nodes with
    what the real one said to --nodes=9."""

    def run(self, argv, *, input=None, env=None, timeout=60, check=True):
        if list(argv) == ["sbatch", "--test-only"] and input and any(
                f"#SBATCH --nodes={n}\n" in input for n in range(4, 100)):
            r = recorded(["sbatch", "--test-only", "--nodes=9"])
            self.calls.append((list(argv), input))
            return Result(tuple(argv), r["rc"], r["stdout"], r["stderr"])
        return super().run(argv, input=input, env=env, timeout=timeout, check=check)


def test_poc_check_tries_the_largest_job_too_and_says_which_and_what_to_do():
    cfg = _cfg(scale={"nodes": [1, 2, 4]}, repetitions=0)
    be = SlurmBackend(cfg.slurm, RefusesMoreThan3())
    first = check_cmd._first_spec(cfg, "slurm")
    big = check_cmd._largest_spec(cfg, "slurm", first)
    assert (first.run_id, big.run_id, big.nodes) == ("slurm-scale-1n-01", "slurm-scale-4n-01", 4)
    target = chk_slurm.SlurmTarget(sched=be.sched, shell=be.t, ssh=None, script=be.render(first).payload.script,
                                   partition=None, largest=(check_cmd._what(big), be.render(big).payload.script))
    r = Runner("slurm")
    chk_slurm.run_all(target, r)
    got = {c.name: c for c in r.checks}
    assert got["sbatch --test-only"].status == "ok"
    bad = got["sbatch --test-only, largest job"]
    assert bad.status == "error"
    assert bad.message == ("sbatch --test-only refused the campaign's largest job (slurm-scale-4n-01: 4 nodes): "
                           "allocation failure: Requested node configuration is not available")
    assert bad.tip == ("the campaign's largest job (slurm-scale-4n-01: 4 nodes) may ask for more nodes than the "
                       "partition has: compare scale.nodes with `sinfo -N` and lower its largest size")
    assert check_cmd._largest_spec(_cfg(), "slurm", check_cmd._first_spec(_cfg(), "slurm")) is None
    assert REC["runs"]   # the recorded answers are there


def test_k8s_the_native_clusters_queue_is_sized_to_the_largest_job():
    cfg = _cfg(scale={"nodes": [1, 2, 3]})
    be = KubernetesBackend.from_config(cfg)
    assert be.setup_spec.nodes == 3
    cq = next(o for o in rj.setup_objects(be.setup_spec, cfg.kubernetes, be.queue_jobs) if o["kind"] == "ClusterQueue")
    quota = {r["name"]: r["nominalQuota"] for r in cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"]}
    assert quota == {"cpu": "3", "memory": "9216Mi", "nvidia.com/gpu": "0"}
    # without a scale curve the queue fits the config's job, as before
    assert KubernetesBackend.from_config(_cfg()).setup_spec.nodes == 2
    assert KubernetesBackend.from_config(_cfg(scale={"nodes": [1]})).setup_spec.nodes == 2


def _cq(cpu="16", memory="64Gi", gpus="16", cohort=None, name="team-a-cq") -> dict:
    return {"kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {**({"cohort": cohort} if cohort else {}), "resourceGroups": [{
                "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                "flavors": [{"name": "h100", "resources": [
                    {"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": memory},
                    {"name": "nvidia.com/gpu", "nominalQuota": gpus}]}]}]}}


GPU = {"resources": {"nodes": 2, "procs_per_node": 8, "gpus_per_node": 8, "cpus_per_node": 8, "memory_mb": 32768},
       "workload": {"sweep": "1K:4G"}}


def _largest(cfg):
    return KubernetesBackend.from_config(cfg).setup_spec


def test_k8s_preflight_refuses_a_size_the_queues_quota_cannot_fit():
    big = _largest(_cfg(**GPU, scale={"nodes": [2, 4, 8]},
                        kubernetes={"kubeconfig": "/home/me/.kube/shared", "image": "r/i:1"}))
    with pytest.raises(BackendError) as e:
        quota_fit.check(_cq(), big)
    assert e.value.message == (
        "the campaign's largest job (8 nodes) does not fit ClusterQueue team-a-cq: cpu: 64 asked for in all, the "
        "nominal quota is 16 (flavor h100); memory: 262144Mi asked for in all, the nominal quota is 64Gi (flavor "
        "h100); nvidia.com/gpu: 64 asked for in all, the nominal quota is 16 (flavor h100): Kueue would never "
        "admit it")
    assert e.value.tip.startswith("lower scale.nodes' largest size (or resources.nodes, cpus_per_node, memory_mb, "
                                  "gpus_per_node) to what the quota fits, or ask the cluster admins for more quota")


def test_k8s_a_job_that_fits_or_may_borrow_is_not_refused_and_what_was_found_is_recorded():
    kube = {"kubeconfig": "/home/me/.kube/shared", "image": "r/i:1"}
    two = _largest(_cfg(**GPU, scale={"nodes": [1, 2]}, kubernetes=kube))
    assert quota_fit.check(_cq(), two) == {"cluster_queue": "team-a-cq", "nodes": 2, "fits": True}
    eight = _largest(_cfg(**GPU, scale={"nodes": [8]}, kubernetes=kube))
    got = quota_fit.check(_cq(cohort="ml"), eight)
    assert got["fits"] is False and got["cohort"] == "ml" and len(got["short_borrowing_from_cohort"]) == 3
    assert quota_fit.check(None, eight) is None        # a ClusterQueue this identity may not read: Kueue decides
    # a resource the ClusterQueue does not cover is recorded, not refused (Kueue may exclude it by prefix)
    rdma = _largest(_cfg(**GPU, kubernetes={**kube, "pod": {"extra_resources": {"rdma/ib": "1"}}}))
    assert quota_fit.check(_cq(), rdma, {"rdma/ib": "1"})["not_covered"] == ["rdma/ib"]


def test_poc_check_weighs_the_quota_against_the_largest_job():
    class One:
        def read(self, kind, name, ns=None):
            return _cq(cpu="4", memory="16Gi", gpus="0"), 200, ""
    lq = {"metadata": {"name": "q"}, "spec": {"clusterQueue": "team-a-cq"}}
    total = {"cpu": 5.0, "memory": 5 * 3072 * 2**20}
    with pytest.raises(Failed) as e:
        check_quota_fit(One(), lq, total, what="the campaign's largest job (k8s-scale-5n-01: 5 nodes)", tip="T")
    assert str(e.value).startswith("the campaign's largest job (k8s-scale-5n-01: 5 nodes) does not fit ClusterQueue "
                                   "team-a-cq: cpu: the job asks for 5 in all, the nominal quota is 4") and \
        e.value.tip == "T"
    cfg = _cfg(scale={"nodes": [1, 5]})
    first = check_cmd._first_spec(cfg, "k8s")
    assert (first.nodes, check_cmd._largest_spec(cfg, "k8s", first).nodes) == (2, 5)
