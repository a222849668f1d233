"""Which images of an object the engine would judge, so faces can prefetch their configs."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from policies.config import Config


@dataclass(frozen=True, slots=True)
class ImageUse:
    """One container image the engine would judge, and where it is written."""

    image: str  # as written in the pod
    pointer: str  # RFC 6901 pointer to the container's "image" field in the object
    container: str
    # Only gpu-device-access-bypass reads it (a container without GPUs): a lookup that fails or is
    # still pending is not worth a word, as offline knowledge judges such images well enough.
    quiet: bool = False


def images_in(
    obj: dict[str, Any], config: Config | None = None, rules: Iterable[str] | None = None
) -> tuple[ImageUse, ...]:
    """Every image the engine would look up in ``obj``, in document order: those of containers the CUDA
    rule judges, and those of containers without devices whose image's NVIDIA_VISIBLE_DEVICES
    gpu-device-access-bypass reads.

    Skips what the engine skips: exempt namespaces, templates that are not GPU-related, templates
    or objects that ignore the rule, and the rule switched off in ``config``; ``rules`` narrows the
    rules whose images are listed.
    """
    from policies import pointer as jsonpointer
    from policies.config import Config
    from policies.cuda.containers import RULE_ID, judged_containers
    from policies.device_images import RULE_ID as BYPASS_ID
    from policies.device_images import image_env_containers
    from policies.engine import ignored_rules, is_gpu_related
    from policies.podspec import extract

    config = config or Config()
    wanted = (RULE_ID, BYPASS_ID) if rules is None else tuple(rules)
    rules = [r for r in wanted if config.settings(r).severity is not None]
    if not rules:
        return ()
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    if str(meta.get("namespace") or "") in config.exempt_namespaces:
        return ()
    found: list[ImageUse] = []
    for pod in extract(obj, config.workload_index):
        if not is_gpu_related(pod, config):
            continue
        ignored = ignored_rules(obj, pod, config)
        cuda: set[tuple[str | int, ...]] = set()
        device_env: set[tuple[str | int, ...]] = set()
        if RULE_ID in rules and RULE_ID not in ignored:
            cuda.update(c.path for c in judged_containers(pod, config.is_gpu))
        if BYPASS_ID in rules and BYPASS_ID not in ignored:
            device_env.update(c.path for c in image_env_containers(pod, config.is_gpu))
        for c in pod.containers:
            image = c.container.get("image")
            if (c.path in cuda or c.path in device_env) and isinstance(image, str) and image.strip():
                at = jsonpointer.join(pod.spec_pointer, (*c.path, "image"))
                found.append(ImageUse(image, at, c.name, quiet=c.path not in cuda))
    return tuple(found)
