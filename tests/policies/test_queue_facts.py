"""policies.queue_facts: Kueue objects as facts, and the most a ClusterQueue can ever reach.

The borrowing cases are the worked examples of Kueue's own documentation
(kubernetes-sigs/kueue site/content/en/docs/concepts/cluster_queue.md @ ff69552e, "Borrowing
example", "BorrowingLimit", "LendingLimit"); the setups are Kueue's site examples in
tests/corpus/queues (SOURCES.tsv).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from policies.facts_build import facts_from_objects
from policies.queue_facts import namespace_selected, queue_facts_from_objects
from tests.support.paths import CORPUS, load_yaml_docs

QUEUES = CORPUS / "queues"


def cq(name: str, cpu: Any, cohort: str = "team-ab", version: str = "v1beta2", **limits: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
        {"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": cpu, **limits}]}]}]}
    if cohort:
        spec["cohortName" if version == "v1beta2" else "cohort"] = cohort
    return {"apiVersion": f"kueue.x-k8s.io/{version}", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def reach(objects: list[dict[str, Any]], queue: str) -> Fraction:
    facts = queue_facts_from_objects(objects)
    assert facts is not None
    return facts.potential(queue, "default-flavor", "cpu")


def test_borrowing_example() -> None:
    # "team-a-cq can admit Workloads with resources adding up to 12+9=21 CPUs"
    assert reach([cq("team-a-cq", 9), cq("team-b-cq", 12)], "team-a-cq") == 21


def test_borrowing_limit_example() -> None:
    # "team-a-cq can admit Workloads with resources adding up to 9+1=10 CPUs"; team-b-cq "up to 12+9"
    objects = [cq("team-a-cq", 9, borrowingLimit=1), cq("team-b-cq", 12)]
    assert reach(objects, "team-a-cq") == 10
    assert reach(objects, "team-b-cq") == 21


def test_lending_limit_example() -> None:
    # "team-a-cq can admit Workloads with resources adding up to 9+1=10 CPUs"
    objects = [cq("team-a-cq", 9), cq("team-b-cq", 12, lendingLimit=1)]
    assert reach(objects, "team-a-cq") == 10
    assert reach(objects, "team-b-cq") == 21


def test_no_cohort_no_borrowing_and_v1beta1_cohort_field() -> None:
    assert reach([cq("alone", 9, cohort=""), cq("other", 12, cohort="")], "alone") == 9
    assert reach([cq("old", 0, version="v1beta1"), cq("new", 12)], "old") == 12


def test_hierarchical_cohorts_and_their_own_quota() -> None:
    # A child cohort whose parent holds quota of its own; the child cohort lends at most 2 upwards.
    parent = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "root"},
              "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                  {"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": 5}]}]}]}}
    child = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "team-ab"},
             "spec": {"parentName": "root"}}
    sibling = cq("c", 7, cohort="root")
    objects = [parent, child, cq("team-a-cq", 9), cq("team-b-cq", 12), sibling]
    assert reach(objects, "team-a-cq") == 9 + 12 + 5 + 7
    legacy_child = {"apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": "Cohort", "metadata": {"name": "team-ab"},
                    "spec": {"parent": "root"}}
    assert reach([parent, legacy_child, cq("team-a-cq", 9), sibling], "team-a-cq") == 9 + 5 + 7
    facts = queue_facts_from_objects(objects)
    assert facts is not None and facts.cohort_members("team-a-cq") == ["c", "team-b-cq"]


def test_a_cohort_cycle_does_not_hang() -> None:
    a = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "x"}, "spec": {"parentName": "y"}}
    b = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "y"}, "spec": {"parentName": "x"}}
    objects = [a, b, cq("q", 3, cohort="x")]
    reach(objects, "q")  # returns
    facts = queue_facts_from_objects(objects)
    assert facts is not None and facts.in_cycle("q") and not facts.in_cycle("missing")


def _setup(name: str) -> Any:
    facts = facts_from_objects(load_yaml_docs(QUEUES / f"kubernetes-sigs__kueue__site__static__examples__{name}"))
    assert facts.queues is not None
    return facts.queues


def test_kueue_site_setups_load() -> None:
    tas = _setup("tas__sample-gpu-queues.yaml")
    assert set(tas.cluster_queues) == {"tas-cluster-queue"}
    assert tas.local_queue("default", "tas-user-queue").cluster_queue == "tas-cluster-queue"
    assert tas.flavors["tas-flavor"].node_labels == {"cloud.provider.com/node-group": "tas-group"}
    assert tas.flavors["tas-flavor"].tolerations[0]["key"] == "nvidia.com/gpu"
    assert tas.potential("tas-cluster-queue", "tas-flavor", "nvidia.com/gpu") == 16
    provisioning = _setup("provisioning__provisioning-setup.yaml")
    assert provisioning.potential("cluster-queue", "default-flavor", "nvidia.com/gpu") == 9
    single = _setup("admin__single-clusterqueue-setup.yaml")
    assert single.cluster_queues["cluster-queue"].group_of("nvidia.com/gpu") is None
    assert single.potential("cluster-queue", "default-flavor", "memory") == 36 * 2**30


def test_no_kueue_objects_means_kueue_is_not_known() -> None:
    assert queue_facts_from_objects([{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}]) is None
    assert facts_from_objects([]).queues is None


@pytest.mark.parametrize(("selector", "namespace", "expected"), [
    (None, "team-a", False),
    ({}, "team-a", True),
    ({"matchLabels": {"kubernetes.io/metadata.name": "team-a"}}, "team-a", True),
    ({"matchLabels": {"kubernetes.io/metadata.name": "team-a"}}, "team-b", False),
    ({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["a", "b"]}]}, "b", True),
    ({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["b"]}]}, "b", False),
    ({"matchLabels": {"research-cohort": "team-a-b"}}, "team-a", None),
])
def test_namespace_selector(selector: Any, namespace: str, expected: bool | None) -> None:
    assert namespace_selected(selector, namespace) is expected


def test_workloads_read_conditions_admission_and_owner() -> None:
    wl = {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "job-train-1a2b3", "namespace": "team-a",
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "controller": True}]},
        "spec": {"queueName": "team-a", "podSets": [{"name": "main", "count": 4, "template": {"spec": {}}}]},
        "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                                   "message": "couldn't assign flavors to pod set main: insufficient unused quota"}]},
    }
    facts = queue_facts_from_objects([wl])
    assert facts is not None
    got = facts.workloads[("team-a", "job-train-1a2b3")]
    assert (got.owner_kind, got.owner_name, got.queue_name) == ("Job", "train", "team-a")
    assert got.pod_sets[0].count == 4 and not got.admitted
    assert got.condition("QuotaReserved") is not None
