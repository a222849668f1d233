"""Image facts: the interface the faces fill, the images they prefetch, and the rule-result memo."""

from __future__ import annotations

from typing import Any

import yaml

from gpuguard.sources.configmodel import load_config
from policies import ClusterFacts, evaluate
from policies.engine import images_in
from policies.facts_build import facts_from_objects
from policies.image_uses import ImageUse
from policies.images import (
    ImageConfig,
    ImageLookup,
    NoImageFacts,
    lookup_archs,
    lookup_key,
    node_arch,
)
from tests.policies.cuda.test_require import nvidia_cuda_requirement
from tests.support.paths import EXAMPLES

RULE = "gpu-cuda-driver-mismatch"
# An image config as nvidia/cuda 13.0.2 publishes it: its CUDA_VERSION and the runtime's requirement.
CUDA_13 = ImageConfig(env=(("CUDA_VERSION", "13.0.2"),
                           ("NVIDIA_REQUIRE_CUDA", nvidia_cuda_requirement("13.0", [535, 550, 565, 570, 575]))))


class DictImageFacts:
    """An ImageFacts over a dict, as a face's cache view would be; counts its lookups."""

    def __init__(self, known: dict[str, ImageLookup]) -> None:
        self.known = known
        self.calls: list[tuple[str, str]] = []

    def lookup(self, image: str, arch: str) -> ImageLookup | None:
        self.calls.append((image, arch))
        return self.known.get(image)


def _deployment(*containers: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "ml", **meta},
        "spec": {"template": {"spec": {"tolerations": [{"operator": "Exists"}], "containers": list(containers)}}},
    }


def _gpu(name: str, image: Any, gpus: int = 1, **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": image, "resources": {"limits": {"nvidia.com/gpu": gpus}}, **extra}


def test_images_in_lists_the_gpu_containers_the_rule_judges() -> None:
    obj = _deployment(_gpu("a", "nvidia/cuda:12.4.1-base-ubuntu22.04"), {"name": "sidecar", "image": "busybox"},
                      _gpu("zero", "ubuntu", gpus=0), _gpu("b", "example.com/app:1"), _gpu("noimage", None))
    assert images_in(obj, rules=[RULE]) == (
        ImageUse("nvidia/cuda:12.4.1-base-ubuntu22.04", "/spec/template/spec/containers/0/image", "a"),
        ImageUse("example.com/app:1", "/spec/template/spec/containers/3/image", "b"),
    )


def test_images_in_also_lists_containers_without_devices_that_keep_their_images_variables() -> None:
    """gpu-device-access-bypass reads the NVIDIA_VISIBLE_DEVICES of images of containers without GPUs
    that do not set it themselves; in document order, each container once."""
    void = {"name": "opted-out", "image": "nvidia/cuda:12.4.1-base-ubuntu22.04",
            "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]}
    obj = _deployment(_gpu("a", "nvidia/cuda:12.4.1-base-ubuntu22.04"), {"name": "sidecar", "image": "busybox"},
                      _gpu("zero", "ubuntu", gpus=0), void)
    assert [(u.image, u.container) for u in images_in(obj)] == [
        ("nvidia/cuda:12.4.1-base-ubuntu22.04", "a"), ("busybox", "sidecar"), ("ubuntu", "zero"),
    ]
    assert [u.container for u in images_in(obj, rules=["gpu-device-access-bypass"])] == ["sidecar", "zero"]


def test_images_in_skips_what_the_engine_skips() -> None:
    obj = _deployment(_gpu("a", "example.com/app:1"))
    assert images_in(obj, load_config({"exemptNamespaces": ["ml"]})) == ()
    assert images_in(obj, load_config({"rules": {RULE: {"severity": "off"}}})) == ()
    ignored = _deployment(_gpu("a", "example.com/app:1"), annotations={"gpuguard.io/ignore": RULE})
    assert images_in(ignored) == ()
    # "all" does not skip gpu-device-access-bypass, which still reads the sidecar's image
    everything = _deployment(_gpu("a", "example.com/app:1"), {"name": "s", "image": "busybox"},
                             annotations={"gpuguard.io/ignore": "all"})
    assert [u.container for u in images_in(everything)] == ["s"]
    assert images_in({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}) == ()


def test_archs_to_prefetch() -> None:
    facts = facts_from_objects(list(yaml.safe_load_all((EXAMPLES / "cluster.yaml").read_text())))
    assert lookup_archs(facts) == ("amd64",)
    arm = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "g", "labels": {"kubernetes.io/arch": "arm64"}}}
    assert lookup_archs(facts_from_objects([arm])) == ("arm64",)
    assert lookup_archs(ClusterFacts.empty()) == ("amd64",)
    assert node_arch({}) == "amd64" and node_arch({"kubernetes.io/arch": "arm64"}) == "arm64"


def test_no_image_facts_is_the_default_and_knows_nothing() -> None:
    assert NoImageFacts().lookup("ubuntu", "amd64") is None
    assert lookup_key(NoImageFacts(), (("ubuntu", "amd64"),)) == (None,)


def _example_facts() -> ClusterFacts:
    return facts_from_objects(list(yaml.safe_load_all((EXAMPLES / "cluster.yaml").read_text())))


def test_a_result_computed_while_a_lookup_was_pending_does_not_stick() -> None:
    facts = _example_facts()
    obj = _deployment(_gpu("app", "example.com/app:1"))
    config = load_config({})
    pending = DictImageFacts({"example.com/app:1": ImageLookup("pending", detail="in flight")})
    assert [f for f in evaluate(obj, config, facts, pending).findings if f.rule == RULE] == []
    found = DictImageFacts({"example.com/app:1": ImageLookup("found", CUDA_13)})
    findings = [f for f in evaluate(obj, config, facts, found).findings if f.rule == RULE]
    assert len(findings) == 1 and "needs CUDA 13.0.2 (from image config CUDA_VERSION=13.0.2" in findings[0].message
    assert ("example.com/app:1", "amd64") in found.calls
    # and back: the memo is keyed on what the lookup says, not on the ImageFacts object
    again = DictImageFacts({"example.com/app:1": ImageLookup("pending")})
    assert [f for f in evaluate(obj, config, facts, again).findings if f.rule == RULE] == []


def test_identical_lookups_share_the_memoised_result() -> None:
    facts = _example_facts()
    config = load_config({})
    obj = _deployment(_gpu("app", "nvidia/cuda:13.0.2-base-ubuntu22.04"))
    first = evaluate(obj, config, facts, DictImageFacts({})).findings
    second = evaluate(obj, config, facts, DictImageFacts({})).findings
    assert first and first == second
    assert first[0].message == evaluate(obj, config, facts).findings[0].message  # None lookups = offline


def test_one_spec_extracted_two_ways_looks_up_each_way_s_own_images() -> None:
    """A Pod's spec and an Argo template can be the same mapping yet hold other containers (a Pod
    runs ``containers``, an Argo template ``container``).  The lookups a memoised result depends on
    are keyed on how the template was extracted too: the Workflow's result, computed while its
    image was pending, must not outlive the lookup because a Pod with that content came first."""
    facts = _example_facts()
    config = load_config({})
    body = {"tolerations": [{"operator": "Exists"}], "containers": [_gpu("a", "example.com/a:1")],
            "container": _gpu("b", "example.com/b:1")}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}, "spec": dict(body)}
    workflow = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "metadata": {"name": "w", "namespace": "ml"},
                "spec": {"templates": [dict(body)]}}
    pending = DictImageFacts({"example.com/b:1": ImageLookup("pending", detail="in flight")})
    evaluate(pod, config, facts, pending)
    assert [f for f in evaluate(workflow, config, facts, pending).findings if f.rule == RULE] == []
    found = DictImageFacts({"example.com/b:1": ImageLookup("found", CUDA_13)})
    findings = [f for f in evaluate(workflow, config, facts, found).findings if f.rule == RULE]
    assert len(findings) == 1 and "container 'b': image example.com/b:1 needs CUDA 13.0.2" in findings[0].message
