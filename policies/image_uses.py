"""Which images of an object the engine would judge, so faces can prefetch their configs."""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from policies.config import Config
    from policies.podspec import PodTemplate


@dataclass(frozen=True, slots=True)
class ImageUse:
    """One container image the engine would judge, and where it is written."""

    image: str  # as written in the pod
    pointer: str  # RFC 6901 pointer to the container's "image" field in the object
    container: str
    # Only gpu-device-access-bypass reads it (a container without GPUs): a lookup that fails or is
    # still pending is not worth a word, as offline knowledge judges such images well enough.
    quiet: bool = False


def image_uses(
    pod: PodTemplate, config: Config, ignored: AbstractSet[str], rules: Iterable[str] | None = None
) -> tuple[ImageUse, ...]:
    """The images of one template that the enabled rules (of ``rules``; both by default) not in
    ``ignored`` look up, in container order."""
    from policies import pointer as jsonpointer
    from policies.cuda.containers import RULE_ID, judged_containers
    from policies.device_images import RULE_ID as BYPASS_ID
    from policies.device_images import image_env_containers

    wanted = (RULE_ID, BYPASS_ID) if rules is None else tuple(rules)
    enabled = {r for r in wanted if r not in ignored and config.settings(r).severity is not None}
    if not enabled:
        return ()
    cuda: set[tuple[str | int, ...]] = set()
    device_env: set[tuple[str | int, ...]] = set()
    if RULE_ID in enabled:
        cuda.update(c.path for c in judged_containers(pod, config.is_gpu))
    if BYPASS_ID in enabled:
        device_env.update(c.path for c in image_env_containers(pod, config.is_gpu))
    found: list[ImageUse] = []
    for c in pod.containers:
        image = c.container.get("image")
        if (c.path in cuda or c.path in device_env) and isinstance(image, str) and image.strip():
            at = jsonpointer.join(pod.spec_pointer, (*c.path, "image"))
            found.append(ImageUse(image, at, c.name, quiet=c.path not in cuda))
    return tuple(found)
