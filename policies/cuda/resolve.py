"""Which CUDA version a container's image needs, in order of authority:

1. the annotation ``gpuguard.io/cuda-version.<container>`` on the pod (template) metadata;
2. the annotation ``gpuguard.io/cuda-version`` (every container of the pod);
3. the rule option ``imageRules`` (``[{pattern: <RE2 regex>, cudaVersion: "12.4"}]``, first match wins;
   the pattern is searched in the whole image reference, anchor it with ``^`` as needed);
4. the image reference itself (``policies.cuda.conventions``).

Annotation values and rule versions must be dotted numbers (``12.4`` or ``12.4.1``); an
unreadable one is skipped and the next source is tried.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from policies import patterns
from policies.cuda.conventions import offline_cuda
from policies.cuda.versions import Version, parse_version
from policies.shapes import as_list

ANNOTATION = "gpuguard.io/cuda-version"


@dataclass(frozen=True, slots=True)
class ImageRule:
    pattern: patterns.Pattern
    version: Version


@dataclass(frozen=True, slots=True)
class Resolution:
    version: Version
    source: str
    datacenter_drivers: tuple[Version, ...] | None = None  # NGC release notes' own forward-compat list


def parse_image_rules(raw: Any) -> tuple[tuple[ImageRule, ...], list[str]]:
    """Valid rules and a problem description for each entry that is not one."""
    rules: list[ImageRule] = []
    problems: list[str] = []
    for i, entry in enumerate(as_list(raw)):
        if not isinstance(entry, Mapping):
            problems.append(f"imageRules[{i}]: expected a mapping with pattern and cudaVersion")
            continue
        version = parse_version(entry.get("cudaVersion"))
        if version is None or len(version) < 2:
            problems.append(f"imageRules[{i}].cudaVersion: expected a version such as \"12.4\"")
            continue
        try:
            pattern = patterns.compile(str(entry.get("pattern", "")))
        except patterns.PatternError as exc:
            problems.append(f"imageRules[{i}].pattern: invalid regular expression ({exc})")
            continue
        rules.append(ImageRule(pattern, version))
    return tuple(rules), problems


def _annotation_version(annotations: Mapping[str, Any], key: str) -> Version | None:
    version = parse_version(annotations.get(key))
    return version if version is not None and len(version) >= 2 else None


def resolve_explicit(
    image: str | None,
    container: str | None = None,
    annotations: Mapping[str, Any] | None = None,
    rules: Sequence[ImageRule] = (),
) -> Resolution | None:
    """Sources 1-3: what the user states (annotations, then ``imageRules``)."""
    if annotations:
        if container:
            key = f"{ANNOTATION}.{container}"
            version = _annotation_version(annotations, key) if key in annotations else None
            if version:
                return Resolution(version, f"annotation {key}")
        version = _annotation_version(annotations, ANNOTATION) if ANNOTATION in annotations else None
        if version:
            return Resolution(version, f"annotation {ANNOTATION}")
    if not isinstance(image, str):
        return None
    for rule in rules:
        if rule.pattern.search(image):
            return Resolution(rule.version, f"imageRules pattern {rule.pattern.pattern!r}")
    return None


def resolve(
    image: str | None,
    container: str | None = None,
    annotations: Mapping[str, Any] | None = None,
    rules: Sequence[ImageRule] = (),
    arch: str = "amd64",
) -> Resolution | None:
    found = resolve_explicit(image, container, annotations, rules)
    if found is not None or not isinstance(image, str):
        return found
    offline = offline_cuda(image, arch)
    if offline.cuda is None:
        return None
    return Resolution(offline.cuda.version, offline.cuda.source, offline.cuda.datacenter_drivers)
