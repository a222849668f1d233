"""What one GPU container needs from the driver, and what the NVIDIA runtime will check.

The CUDA version comes, in order of authority, from

1. the pod's annotations and the rule's ``imageRules`` (the user's own statement);
2. the image config from a registry (``ImageFacts``): its ``CUDA_VERSION``, else the floor of its
   ``NVIDIA_REQUIRE_CUDA`` — unless the offline knowledge knows the image needs more than its
   config says (a TGI image on a 12.1 base with 12.4 kernels), which then wins with a note;
3. the offline knowledge of image names (``policies.cuda.conventions``).

What the runtime checks is the requirement set of the container's final environment (image Env
overridden by the pod's ``env:``; ``policies.cuda.environment``, ``policies.cuda.require``).  It is
modelled whenever something of that environment is known: the image config, or variables the pod
sets itself.  Without either, gpuguard judges by CUDA compatibility alone, as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from policies import patterns
from policies.boundedcache import small_key_cache
from policies.cuda.conventions import Offline, offline_cuda
from policies.cuda.environment import PodEnv, final_environment, image_value, pod_env
from policies.cuda.require import (
    CUDA_VERSION,
    DISABLE_REQUIRE,
    REQUIRE_CUDA,
    REQUIRE_JETPACK,
    REQUIRE_PREFIX,
    EnvValue,
    Requirements,
    cuda_floor,
    parse_bool,
    requirements,
)
from policies.cuda.resolve import ImageRule, Resolution, resolve_explicit
from policies.cuda.versions import Version, format_version, major_minor
from policies.images import ImageConfig, ImageLookup

NeedStatus = Literal["cuda", "no-cuda", "unknown"]
_LEADING_VERSION = patterns.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?")

# shared/reference/cuda-images.md section 1: env dumps of Triton 23.12, PyTorch 23.10 and 20.06.
NGC_CAVEAT = (
    "NGC framework images set NVIDIA_REQUIRE_CUDA=cuda>=9.0 whatever CUDA they carry, so the runtime's "
    "check will not stop them on an older driver"
)


@dataclass(frozen=True, slots=True)
class Need:
    status: NeedStatus
    resolution: Resolution | None  # set iff status == "cuda"
    requirements: Requirements | None  # None: the runtime's check is not modelled
    informative: bool  # the runtime's own check covers the needed CUDA version
    image_requirement: str | None  # NVIDIA_REQUIRE_CUDA of the image config, when known
    notes: tuple[str, ...] = ()
    pod_changes_check: bool = False  # the pod disables or overrides the runtime's requirements
    config: ImageConfig | None = None


def config_version(env: Sequence[tuple[str, str]]) -> Version | None:
    """The leading ``X.Y[.Z]`` of CUDA_VERSION (NGC images write four parts: ``12.2.2.009``)."""
    raw = image_value(env, CUDA_VERSION)
    m = _LEADING_VERSION.match(raw or "")
    if m is None:
        return None
    return tuple(int(p) for p in m.groups() if p is not None)


def _from_config(config: ImageConfig) -> Resolution | None:
    version = config_version(config.env)
    where = f" ({config.source})" if config.source else ""
    if version is not None:
        raw = image_value(config.env, CUDA_VERSION)
        return Resolution(version, f"image config CUDA_VERSION={raw}{where}")
    require = image_value(config.env, REQUIRE_CUDA)
    floor = cuda_floor([require]) if require else None
    if require and floor is not None and len(floor) >= 2:
        return Resolution(floor, f"image config NVIDIA_REQUIRE_CUDA={require.split(' ', 1)[0]}{where}")
    return None


def _offline_resolution(offline: Offline) -> Resolution | None:
    if offline.status != "cuda" or offline.cuda is None:
        return None
    return Resolution(offline.cuda.version, offline.cuda.source, offline.cuda.datacenter_drivers)


def _pod_notes(pod_values: Mapping[str, Any], reqs: Requirements | None) -> list[str]:
    notes = []
    disable = pod_values.get(DISABLE_REQUIRE)
    if disable is not None:
        if isinstance(disable, str):
            if reqs is not None and reqs.disabled:
                notes.append(f"the pod sets {DISABLE_REQUIRE}={disable}: the NVIDIA runtime checks no requirement")
        else:
            notes.append(f"the pod sets {DISABLE_REQUIRE} from a reference: whether the runtime checks is unknown")
    for name in sorted(pod_values):
        if name.startswith(REQUIRE_PREFIX) and not name.startswith(REQUIRE_JETPACK):
            value = pod_values[name]
            shown = value if isinstance(value, str) else "(from a reference)"
            notes.append(f"the pod sets {name}={shown}: the runtime checks it instead of the image's")
    return notes


def container_need(
    image: str | None,
    container: Mapping[str, Any],
    container_name: str | None,
    annotations: Mapping[str, Any] | None,
    rules: Sequence[ImageRule],
    lookup: ImageLookup | None,
    arch: str,
) -> Need:
    pod = pod_env(container)
    explicit = resolve_explicit(image, container_name, annotations, rules)
    if lookup is None and isinstance(image, str):
        values = tuple(pod.values.items())
        if len(image) + sum(len(n) + len(v) if isinstance(v, str) else len(n) for n, v in values) <= MEMO_KEY_CHARS:
            return _offline_need(image, values, pod.open, explicit, arch)
    return _need(image, pod, explicit, lookup, arch)


# Judged offline, a need depends only on the image, the pod's runtime variables (few pods set any)
# and what the user stated: the same for most containers of a fleet.  Keys past this many
# characters are not kept, so hostile values cannot fill the cache.
MEMO_KEY_CHARS = 2048


@small_key_cache(maxsize=2048, max_key_chars=8192)
def _offline_need(
    image: str, values: tuple[tuple[str, EnvValue], ...], opened: bool, explicit: Resolution | None, arch: str
) -> Need:
    return _need(image, PodEnv(dict(values), opened), explicit, None, arch)


def _need(
    image: str | None, pod: PodEnv, explicit: Resolution | None, lookup: ImageLookup | None, arch: str
) -> Need:
    config = lookup.config if lookup is not None and lookup.status == "found" else None
    offline = offline_cuda(image, arch) if isinstance(image, str) else Offline("unknown")
    notes: list[str] = []
    if lookup is not None and config is None:
        detail = f": {lookup.detail}" if lookup.detail else ""
        notes.append(f"registry lookup {lookup.status}{detail}; judged by the image name")

    resolution = explicit
    from_config = _from_config(config) if config is not None else None
    from_name = _offline_resolution(offline)
    if resolution is None and from_config is not None:
        resolution = from_config
        if from_name is not None and major_minor(from_name.version) > major_minor(from_config.version):
            why = offline.caveat or f"its name says CUDA {format_version(from_name.version)}"
            notes.append(f"{why}; judged as CUDA {format_version(from_name.version)}")
            resolution = from_name
        elif from_name is not None and major_minor(from_name.version) == major_minor(from_config.version):
            resolution = Resolution(from_config.version, from_config.source, from_name.datacenter_drivers)
    if resolution is None:
        resolution = from_name

    image_env = config.env if config is not None else None
    modelled = config is not None or bool(pod.values) or pod.open
    reqs = requirements(final_environment(image_env, pod)) if modelled else None
    disable = pod.values.get(DISABLE_REQUIRE)
    pod_changes = (disable is not None and (not isinstance(disable, str) or parse_bool(disable) is True)) or any(
        n.startswith(REQUIRE_PREFIX) and not n.startswith(REQUIRE_JETPACK) for n in pod.values
    )
    notes.extend(_pod_notes(pod.values, reqs))

    informative = False
    if resolution is not None and reqs is not None and reqs.disabled is False and None not in reqs.texts:
        floor = cuda_floor(reqs.texts)
        informative = floor is not None and major_minor(floor) >= major_minor(resolution.version)
        if not informative and not pod_changes:
            shown = image_value(image_env, REQUIRE_CUDA) if image_env is not None else None
            asked = f"its NVIDIA_REQUIRE_CUDA ({shown.split(' ', 1)[0]})" if shown else "its image config"
            notes.append(
                f"{asked} asks for less than CUDA {format_version(major_minor(resolution.version))}: "
                "the runtime's check will not stop it on an older driver"
            )
    elif resolution is not None and config is None and offline.convention in ("ngc-framework", "ngc-same-month"):
        notes.append(NGC_CAVEAT)
    elif resolution is not None and config is None and offline.caveat:
        notes.append(offline.caveat)

    if resolution is not None:
        status: NeedStatus = "cuda"
    elif offline.status == "no-cuda":
        status = "no-cuda"
        notes.append(offline.source)
    else:
        status = "unknown"
        if config is not None:
            notes.append("its image config declares no CUDA_VERSION or NVIDIA_REQUIRE_CUDA")
    return Need(
        status=status,
        resolution=resolution,
        requirements=reqs,
        informative=informative,
        image_requirement=image_value(image_env, REQUIRE_CUDA) if image_env is not None else None,
        notes=tuple(dict.fromkeys(notes)),
        pod_changes_check=pod_changes,
        config=config,
    )
