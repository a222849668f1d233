"""gpu-kind-unknown: an object of a kind gpuguard cannot read asks for GPUs.

gpuguard finds pod templates through a table of kinds (Pods, workload controllers and the AI/ML
custom resources that embed pod templates) plus the ``podTemplatePaths`` of the config.  An
object of any other kind gets no GPU checks at all, so a GPU pod spec inside a custom resource
the table does not know would pass silently.  This rule notices such objects: a kind outside the
table holding a container-like ``resources`` map (``limits``/``requests``) that names a GPU
resource.  It is informational: the object itself may be fine; gpuguard just cannot judge it.

Failing (``example.com/v1 Trainer`` is not in the table)::

    apiVersion: example.com/v1
    kind: Trainer
    spec:
      workers:
        template:
          spec:
            containers:
            - name: train
              resources: {limits: {nvidia.com/gpu: 8}}

Passing (the config tells gpuguard where the pod template is)::

    podTemplatePaths:
      - {apiVersion: example.com/v1, kind: Trainer, template: /spec/workers/template}
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from policies import pointer
from policies.applicability import Applies, never
from policies.rule import NeedsFacts, ObjectContext, Option, RuleContext
from policies.types import RelPath, Severity, Violation

ID = "gpu-kind-unknown"
DEFAULT_SEVERITY = Severity.INFO
NEEDS_FACTS: NeedsFacts = "no"
NEEDS_SCHEDULING: bool = False
APPLIES: Applies = never  # judges whole objects (check_object) only
FIXABLE = False
MUTATION_SAFE = False
SUMMARY = "An object of a kind gpuguard cannot read has a container-like resources map naming a GPU resource."
REMEDIATION = (
    "Tell gpuguard where the kind's pod templates are: add it to podTemplatePaths in the config "
    "({apiVersion, kind, template: <JSON pointer, * for any key or index>} or podSpec: <pointer>)."
)
OPTIONS: tuple[Option, ...] = ()

MAX_NODES = 20_000  # objects are at most 3 MiB; the walk is bounded anyway
MAX_DEPTH = 64
MAX_LISTED = 3


def check(ctx: RuleContext) -> Iterator[Violation]:
    """Pod templates of known kinds are judged by the other rules; this rule judges whole objects."""
    return iter(())


def _gpu_names(resources: Any, ctx: ObjectContext) -> list[str]:
    if not isinstance(resources, dict):
        return []
    names: list[str] = []
    for which in ("limits", "requests"):
        amounts = resources.get(which)
        if isinstance(amounts, dict):
            names.extend(n for n in amounts if isinstance(n, str) and ctx.is_gpu(n) and n not in names)
    return names


def _gpu_resource_maps(obj: Any, ctx: ObjectContext) -> Iterator[tuple[RelPath, list[str]]]:
    """(path of a ``resources`` map naming GPUs, the GPU names), depth-first in document order."""
    stack: list[tuple[RelPath, Any]] = [((), obj)]
    seen = 0
    while stack and seen < MAX_NODES:
        path, node = stack.pop()
        seen += 1
        if len(path) > MAX_DEPTH:
            continue
        if isinstance(node, dict):
            names = _gpu_names(node.get("resources"), ctx)
            if names:
                yield (*path, "resources"), names
            stack.extend(((*path, k), v) for k, v in reversed(list(node.items())) if k != "resources")
        elif isinstance(node, list):
            stack.extend(((*path, i), v) for i, v in reversed(list(enumerate(node))))


def check_object(ctx: ObjectContext) -> Iterator[Violation]:
    found = list(_gpu_resource_maps(ctx.obj, ctx))
    if not found:
        return
    kind, api_version = ctx.obj.get("kind"), ctx.obj.get("apiVersion")
    places = "; ".join(
        f"{pointer.to_dotted(pointer.join('', path))} ({', '.join(names)})" for path, names in found[:MAX_LISTED]
    )
    more = f" and {len(found) - MAX_LISTED} more" if len(found) > MAX_LISTED else ""
    yield Violation(
        message=(
            f"{api_version} {kind} is not a kind gpuguard reads pod templates from, but it asks for GPUs at "
            f"{places}{more}: no GPU rule checks it; add it to podTemplatePaths so they do"
        ),
        path=found[0][0],
        anchor="object",
    )
