"""The DRA objects of the inputs: picked out of texts by the streaming parser, Lists flattened, bounded,
and never an exception for broken input (the linter reports that when it reads the same text)."""

from __future__ import annotations

from gpuguard.sources.dra_inputs import DraCollector, dra_objects, with_file
from policies.dra.facts import NO_INPUTS

TEMPLATE = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {namespace: gpu-test1, name: single-gpu}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.nvidia.com}
"""
POD = """\
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers: [{name: c, image: x}]
"""
SLICE = """\
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s}
spec: {driver: gpu.nvidia.com, nodeName: n, pool: {name: n, generation: 1, resourceSliceCount: 1}}
"""


def test_claims_templates_and_classes_are_picked_out_lists_flattened() -> None:
    listed = "apiVersion: v1\nkind: List\nitems:\n" + "".join(
        "- " + doc.replace("\n", "\n  ").rstrip() + "\n" for doc in (TEMPLATE, POD, SLICE)
    )
    text = "\n---\n".join([TEMPLATE, POD, listed])
    found = dra_objects(text, "m.yaml")
    assert [o["kind"] for o in found] == ["ResourceClaimTemplate", "ResourceClaimTemplate"]


def test_texts_without_the_group_are_not_parsed() -> None:
    assert dra_objects("{{ .Values.broken }: [", "chart.yaml") == []


def test_broken_yaml_gives_what_was_read_before_it() -> None:
    assert [o["kind"] for o in dra_objects(TEMPLATE + "---\nkind: [unclosed\n", "m.yaml")] == [
        "ResourceClaimTemplate"
    ]


def test_the_run_is_bounded_and_the_file_layer_is_nearest() -> None:
    collector = DraCollector()
    for i in range(3):
        collector.add(TEMPLATE.replace("single-gpu", f"t{i}"), f"f{i}.yaml")
    run = collector.inputs()
    assert len(run.layers[0].objects.templates) == 3
    assert DraCollector().inputs() is NO_INPUTS
    inputs = with_file(run, TEMPLATE, "own.yaml")
    assert len(inputs.layers) == 2 and inputs.layers[0].objects.templates[0].name == "single-gpu"
    assert with_file(run, POD, "pod.yaml") is run
    assert len(dra_objects("\n---\n".join([TEMPLATE] * 5), "many.yaml", limit=2)) == 2
