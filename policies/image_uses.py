"""Which images of an object the engine would judge, so faces can prefetch their configs."""

from __future__ import annotations

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


def images_in(obj: dict[str, Any], config: Config | None = None) -> tuple[ImageUse, ...]:
    """Every image of a GPU container the CUDA rule would judge in ``obj``, in document order.

    Skips what the engine skips: exempt namespaces, templates that are not GPU-related, templates
    or objects that ignore the rule, and the rule switched off in ``config``.
    """
    from policies import pointer as jsonpointer
    from policies.config import Config
    from policies.cuda.containers import RULE_ID, judged_containers
    from policies.engine import ignored_rules, is_gpu_related
    from policies.podspec import extract

    config = config or Config()
    if config.settings(RULE_ID).severity is None:
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
        if "all" in ignored or RULE_ID in ignored:
            continue
        for c in judged_containers(pod, config.is_gpu):
            image = c.container.get("image")
            if isinstance(image, str) and image.strip():
                found.append(ImageUse(image, jsonpointer.join(pod.spec_pointer, (*c.path, "image")), c.name))
    return tuple(found)
