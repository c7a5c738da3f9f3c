"""The five user mistakes on the native Kubernetes cluster, through the mistake probe (harness/ux/probe.py),
as poc smoke runs them: the restricted user (namespace poc-gpu, its LocalQueue), the smoke config.

For each mistake the probe must store a run whose messages include one that names the problem, in the
platform's own words, before the deadline; and the cluster must be left with nothing of the run
(no JobSet, Workload, pod or ConfigMap). What each said, and when, was recorded by hand first:
tests/fixtures/k8s/mistakes (about 1 s for most; the entrypoint typo needs the pods to start, ~6-8 s).
About 2 minutes on 2 cores.
"""
from __future__ import annotations

import os
import time

import pytest
from _native import native_cluster, restricted_tenant

pytestmark = [pytest.mark.integration, pytest.mark.k8s]

if os.geteuid() != 0:  # pragma: no cover - depends on the machine
    pytest.skip("the native cluster needs root", allow_module_level=True)

from harness import config  # noqa: E402
from harness.backends.factory import make_backend  # noqa: E402
from harness.backends.k8s.api import JOBSETS, WORKLOADS, K8sClient  # noqa: E402
from harness.backends.k8s.state import workload_of  # noqa: E402
from harness.render import jobset as rj  # noqa: E402
from harness.smoke import smoke_config  # noqa: E402
from harness.store import Store  # noqa: E402
from harness.ux import probe  # noqa: E402

# Kueue says why it does not admit a Workload twice, in the same words and within ~0.1 s of each other
# (recorded: the fixture's timeline): its QuotaReserved condition and its Warning event "Pending".
# Which one a look sees first is a race between the Workload watch cache and the event list.
KUEUE = ("Kueue Workload condition QuotaReserved", "workload event Pending")
# where a user reads each mistake first on this cluster (recorded: tests/fixtures/k8s/mistakes)
EXPECTED = {
    "impossible_resources": (KUEUE, "couldn't assign flavors"),
    "missing_image": (None, "does-not-exist"),      # the kubelet's Failed event or the waiting reason, by a hair
    "wrong_queue": (KUEUE, "doesn't exist"),
    "entrypoint_typo": (("pod log",), "can't open file"),
    # the run's checkpoint sub-path is prepared by a pod on the claim before the JobSet exists: the
    # scheduler's words for that pod end the submission
    "missing_checkpoint_volume": (("at submit: BackendError",),
                                  'persistentvolumeclaim "poc-checkpoints-missing" not found'),
}


@pytest.fixture(scope="module")
def tenant() -> dict:
    return restricted_tenant(native_cluster())


@pytest.fixture(scope="module")
def store(tmp_path_factory, tenant):
    cfg = smoke_config(config.load(None), ["k8s"], 1, tenant=tenant)
    cfg.campaign = "ux-mistakes-k8s"
    s = Store(tmp_path_factory.mktemp("results"), cfg.campaign)
    s.open(cfg.config_hash(), cfg.redacted(), resume=False)
    yield cfg, s
    s.close()


def leftovers(t: dict, name: str) -> dict:
    """What of run `name` is still in the restricted user's namespace (read as the cluster's admin:
    the user's Role may not list ConfigMaps)."""
    from harness.clusters import native_k8s as nk
    c = K8sClient(str(nk.info().kubeconfig))
    ns = t["namespace"]
    try:
        js = [o["metadata"]["name"] for o in c.list("LIST jobsets", JOBSETS, ns) if o["metadata"]["name"] == name]
        wl = [n for n in workload_of(c.list("LIST workloads", WORKLOADS, ns)) if n == name]
        pods = [p.metadata.name for p in c.call("LIST pods", c.core().list_namespaced_pod, ns,
                                                label_selector=f"{rj.JOBSET_NAME_LABEL}={name}").items]
        cms = [m.metadata.name for m in c.call("LIST configmaps", c.core().list_namespaced_config_map, ns).items
               if m.metadata.name.startswith(f"{name}-")]
    finally:
        c.close()
    return {k: v for k, v in {"jobsets": js, "workloads": wl, "pods": pods, "configmaps": cms}.items() if v}


@pytest.mark.parametrize("kind", list(EXPECTED))
def test_the_platform_names_the_mistake_before_the_deadline_and_nothing_is_left(kind, store, tenant):
    cfg, s = store
    run_id = f"k8s-mistake-{kind.replace('_', '-')}"
    rec = probe.run(cfg, "k8s", run_id, kind, s, make_backend)
    m = rec["mistake"]
    said = "\n".join(f"+{x['at_s']}s [{x['source']}] {x['text'][:200]}" for x in m["messages"])
    print(f"\n{kind}: clear={m['clear']} after {m['time_to_error_s']} s (resolution {m['resolution_s']} s) "
          f"[{m['source']}] {str(m['message'])[:300]!r}; calls {rec['ux']['calls']}")
    assert rec["status"] == "ok", rec.get("error")
    assert m["clear"], f"no clear message within {m['deadline_s']} s; the user saw:\n{said}"
    source, words = EXPECTED[kind]
    assert words in m["message"], said
    if source is not None:
        assert m["source"] in source, said
    assert m["time_to_error_s"] <= m["deadline_s"]
    assert f"time_to_error_s:{kind}" in rec["metrics"]
    # the calls it took to watch: one events list per look, the objects from the watch caches; a job
    # refused at submit was never watched
    watch = rec["ux"]["calls"].get("watch", {})
    if m["source"].startswith("at submit"):
        assert not watch and rec["ux"]["calls"]["submit"], rec["ux"]
    else:
        assert watch.get("LIST events", 0) >= 1, rec["ux"]
    assert not rec.get("cancel_error"), rec["cancel_error"]
    deadline = time.monotonic() + 60          # deletion propagates (Foreground: pods, then the JobSet)
    while (left := leftovers(tenant, run_id)) and time.monotonic() < deadline:
        time.sleep(1)
    assert not left, f"left on the cluster after the probe: {left}"
    stored = [r for r in s.runs() if r["run_id"] == run_id]
    assert stored and stored[-1]["mistake"]["message"] == m["message"]
    assert not s.inflight(), "the probe left its run marked in flight"
