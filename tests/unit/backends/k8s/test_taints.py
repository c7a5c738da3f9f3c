"""Taints and tolerations as kube-scheduler's TaintToleration filter matches them."""
from __future__ import annotations

import pytest

from harness.backends.k8s import taints

GPU = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


@pytest.mark.parametrize(("toleration", "expected"), [
    ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, True),
    ({"key": "nvidia.com/gpu", "operator": "Exists"}, True),                      # every effect
    ({"operator": "Exists"}, True),                                              # every taint
    ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}, True),
    ({"key": "nvidia.com/gpu", "value": "present"}, True),                       # Equal is the default
    ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "absent"}, False),
    ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, False),
    ({"key": "other", "operator": "Exists"}, False),
    ({"operator": "Equal", "value": "present"}, False),                          # Equal needs a key
])
def test_tolerates(toleration, expected):
    assert taints.tolerates(toleration, GPU) is expected


def test_untolerated_keeps_lasting_blocking_taints_only():
    node = {"spec": {"taints": [GPU, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
                                {"key": "spot", "value": "true", "effect": "PreferNoSchedule"},
                                {"key": "team", "value": "infer", "effect": "NoExecute"}]}}
    assert taints.untolerated(node, []) == [GPU, {"key": "team", "value": "infer", "effect": "NoExecute"}]
    assert taints.untolerated(node, [{"operator": "Exists"}]) == []
    assert taints.untolerated({"metadata": {}}, []) == []


def test_text_is_kubectls_form():
    assert taints.text(GPU) == "nvidia.com/gpu=present:NoSchedule"
    assert taints.text({"key": "dedicated", "effect": "NoExecute"}) == "dedicated:NoExecute"
    assert taints.toleration_for(GPU) == "{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}"
