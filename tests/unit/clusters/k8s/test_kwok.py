"""Emulated nodes (harness/clusters/k8s/kwok.py) without a cluster: node objects, topology, stages, config."""
from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pytest
import yaml

from harness.clusters.k8s import kwok
from harness.errors import ConfigError


def test_a_node_has_its_gpus_labels_and_the_taint_real_pods_do_not_tolerate():
    node = kwok.node_manifest(7, kwok.Shape(nodes=16, gpus=8))
    assert node["metadata"]["name"] == "kwok-0007"
    labels = node["metadata"]["labels"]
    assert labels["type"] == "kwok" and labels["kubernetes.io/hostname"] == "kwok-0007"
    assert node["spec"]["taints"] == [{"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}]
    for field in ("capacity", "allocatable"):
        assert node["status"][field]["nvidia.com/gpu"] == "8"
        assert {"cpu", "memory", "pods"} <= set(node["status"][field])


def test_a_cpu_only_shape_advertises_no_gpus():
    node = kwok.node_manifest(1, kwok.Shape(nodes=1, gpus=0))
    assert "nvidia.com/gpu" not in node["status"]["capacity"]
    assert "nvidia.com/gpu.present" not in node["metadata"]["labels"]


def test_racks_and_blocks_fill_in_order():
    shape = kwok.Shape(nodes=70, rack_size=8, racks_per_block=4)
    topo = [kwok.topology(i, shape) for i in range(1, 71)]
    racks = Counter(t[kwok.RACK_LABEL] for t in topo)
    blocks = Counter(t[kwok.BLOCK_LABEL] for t in topo)
    assert topo[0] == {kwok.BLOCK_LABEL: "b00", kwok.RACK_LABEL: "b00-r00"}
    assert topo[8] == {kwok.BLOCK_LABEL: "b00", kwok.RACK_LABEL: "b00-r01"}
    assert topo[32] == {kwok.BLOCK_LABEL: "b01", kwok.RACK_LABEL: "b01-r00"}
    assert set(racks.values()) == {8, 6}                  # 8 full racks and the last, partial one
    assert blocks == {"b00": 32, "b01": 32, "b02": 6}


@pytest.mark.parametrize("field,value", [("nodes", 0), ("rack_size", 0), ("racks_per_block", -1), ("gpus", -1),
                                         ("nodes", 10000)])
def test_a_bad_shape_is_refused_with_a_tip(field, value):
    with pytest.raises(ConfigError) as err:
        kwok.Shape(**{"nodes": 4, field: value}).check()
    assert err.value.tip


def _stage(name, kind="Pod", delay=True):
    spec = {"resourceRef": {"apiGroup": "v1", "kind": kind}, "next": {}}
    if delay:
        spec["delay"] = {"durationMilliseconds": 1000, "jitterDurationMilliseconds": 5000}
    return {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": name}, "spec": spec}


def test_pods_run_at_once_and_complete_after_exactly_their_annotated_delay(tmp_path):
    for rel in kwok.NODE_STAGE_FILES:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(yaml.safe_dump(_stage(rel.rsplit("/", 1)[1][:-5], "Node")))
    for rel in kwok.POD_STAGE_FILES:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(yaml.safe_dump(_stage(rel.rsplit("/", 1)[1][:-5])))
    by = {s["metadata"]["name"]: s["spec"] for s in kwok.stages(tmp_path)}
    assert "delay" not in by["pod-create"] and "delay" not in by["pod-ready"]
    complete = by["pod-complete"]["delay"]
    assert "jitterDurationMilliseconds" not in complete and "jitterDurationFrom" not in complete
    assert kwok.DELAY_ANNOTATION in complete["durationFrom"]["expressionFrom"]
    # a deleted pod goes after 1 s, not after a random part of its grace period (KWOK's jitter)
    assert by["pod-delete"]["delay"] == {"durationMilliseconds": 1000}
    assert by["node-initialize"]["delay"]["durationMilliseconds"] == 1000     # node stages untouched


def test_a_missing_stage_file_says_where_it_looked(tmp_path):
    with pytest.raises(Exception, match="stage file"):
        kwok.stages(tmp_path)


def test_the_config_manages_only_labelled_nodes_with_stages_from_the_file():
    docs = kwok.config_documents([_stage("pod-ready")])
    options = docs[0]["options"]
    assert docs[0]["kind"] == "KwokConfiguration"
    assert options["manageNodesWithLabelSelector"] == "type=kwok" and options["enableCRDs"] == []
    assert options["nodeLeaseDurationSeconds"] / 4 < 20        # renewed well within the node grace period
    assert docs[1]["kind"] == "Stage"
    argv = kwok.command(kwok.Path("/k"), kwok.Path("/c.yaml"), kwok.Path("/bin/kwok"))
    assert argv[argv.index("--manage-nodes-with-label-selector") + 1] == "type=kwok"


class _FakeCore:
    """The CoreV1Api calls kwok.py makes, on a dict of node names."""

    def __init__(self, names=()):
        self.nodes = set(names)
        self.calls = Counter()

    def list_node(self, label_selector):
        self.calls["list"] += 1
        assert label_selector == kwok.SELECTOR
        return SimpleNamespace(items=[SimpleNamespace(metadata=SimpleNamespace(name=n)) for n in sorted(self.nodes)])

    def create_node(self, body):
        self.calls["create"] += 1
        self.nodes.add(body["metadata"]["name"])

    def delete_node(self, name):
        self.calls["delete"] += 1
        self.nodes.discard(name)

    def delete_collection_node(self, label_selector):
        self.calls["delete_collection"] += 1
        self.nodes.clear()


class _FakeLeases:
    """The CoordinationV1Api calls kwok.py makes, on a set of lease names in kube-node-lease."""

    def __init__(self, names=()):
        self.names = set(names)

    def list_namespaced_lease(self, namespace):
        assert namespace == kwok.LEASE_NAMESPACE
        return SimpleNamespace(items=[SimpleNamespace(metadata=SimpleNamespace(name=n)) for n in sorted(self.names)])

    def delete_namespaced_lease(self, name, namespace):
        self.names.discard(name)


def test_creating_nodes_makes_only_the_missing_ones_after_dropping_their_stale_leases():
    core = _FakeCore(["kwok-0002"])
    # a deleted node's lease, not yet collected, would keep the node of the same name from turning Ready
    leases = _FakeLeases(["kwok-0001", "kwok-0002", "other-node"])
    created = kwok.create_nodes(core, kwok.Shape(nodes=4), workers=2, leases=leases)
    assert sorted(created) == ["kwok-0001", "kwok-0003", "kwok-0004"]
    assert core.nodes == {f"kwok-000{i}" for i in range(1, 5)} and core.calls["create"] == 3
    assert leases.names == {"kwok-0002", "other-node"}      # a live node's lease and others' are kept


def test_deleting_all_is_one_request_and_idempotent_and_takes_the_leases_along():
    core = _FakeCore([f"kwok-000{i}" for i in range(1, 5)])
    leases = _FakeLeases([f"kwok-000{i}" for i in range(1, 5)] + ["poc-n1"])
    assert kwok.delete_nodes(core, leases=leases) == 4 and core.calls["delete_collection"] == 1
    assert leases.names == {"poc-n1"}
    assert kwok.delete_nodes(core, leases=leases) == 0 and core.calls["delete_collection"] == 1
    core = _FakeCore(["kwok-0001", "kwok-0002"])
    leases = _FakeLeases(["kwok-0001", "kwok-0002"])
    assert kwok.delete_nodes(core, ["kwok-0002", "kwok-0009"], leases=leases) == 1 and core.nodes == {"kwok-0001"}
    assert leases.names == {"kwok-0001"}
