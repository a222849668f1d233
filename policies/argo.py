"""How the Argo Workflows controller turns a template into the pod of a step.

Sources: argoproj/argo-workflows (v4.1.2) workflow/controller/workflowpod.go and
pkg/apis/workflow/v1alpha1/workflow_types.go (``WorkflowSpec``, ``Template``).

1. ``spec.templateDefaults`` is merged into the template first (operator.go
   ``mergedTemplateDefaultsInto``): a strategic merge patch with the defaults as the original and
   the template as the patch, so the template's values win, maps merge key by key, and the lists
   ``Template`` tags ``patchStrategy:"merge"`` merge by key (``TEMPLATE_MERGE_KEYS``; inside a
   container the core/v1 ``Container`` lists, ``CONTAINER_MERGE_KEYS``).  Other lists are replaced.
   The defaults of another template type (``container`` for a ``script`` template…) are dropped
   first.  An empty value of the template is left out of its JSON (``omitempty``), so the default
   applies.
2. The workflow spec then fills what the template leaves unset (workflowpod.go ``build`` and
   ``addSchedulingConstraints``), the template winning: ``nodeSelector``, ``affinity``,
   ``tolerations`` (the template's boundary, a steps or DAG template that calls it, comes between
   the two), ``schedulerName``, ``priorityClassName`` (``podPriorityClassName`` in the workflow),
   the pod ``securityContext``, ``podResources`` (pod-level ``resources``) and, from v4.1,
   ``resourceClaims`` — "the template level replacing the workflow level rather than merging with
   it" (an empty list inherits).  ``podMetadata`` labels and annotations come first, the template's
   ``metadata`` over them (``addMetadata``).  The workflow's ``volumes`` are added where a mount
   names them (``addVolumeReferences``: podspec ``inherited_volumes``).
3. ``podSpecPatch`` (the workflow's, then the template's) is applied last and can change anything.

So a template is judged as the pod it becomes.  Where that pod cannot be known — a podSpecPatch,
or a field the template leaves unset while a steps/DAG template of the workflow sets it (the
boundary may supply it) — scheduling is unknown (podspec ``scheduling_known``); with a
podSpecPatch the pod's claims are unknown too (``patched``).  A field taken from elsewhere keeps
the pointer of its source (``origins``), so findings and fixes land where the value is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from policies import pointer
from policies.shapes import as_dict

# Template types (workflow_types.go ``TemplateType``): the template field of each.
TEMPLATE_TYPES = ("container", "script", "containerSet", "steps", "dag", "resource", "data", "suspend", "http",
                  "plugin")
POD_TYPES = ("container", "script", "containerSet")
# ``Template`` lists with patchStrategy:"merge" and their patchMergeKey.
TEMPLATE_MERGE_KEYS = {"volumes": "name", "initContainers": "name", "sidecars": "name", "tolerations": "key",
                       "hostAliases": "ip"}
# core/v1 ``Container`` lists with patchStrategy:"merge" (k8s.io/api core/v1 types.go).
CONTAINER_MERGE_KEYS = {"env": "name", "volumeMounts": "mountPath", "ports": "containerPort",
                        "volumeDevices": "devicePath"}
CONTAINER_FIELDS = ("container", "script")  # templates whose value is a container
# (template field, workflow spec field, pod spec field); the template's value wins when set.
INHERITED = (
    ("nodeSelector", "nodeSelector", "nodeSelector"),
    ("affinity", "affinity", "affinity"),
    ("tolerations", "tolerations", "tolerations"),
    ("schedulerName", "schedulerName", "schedulerName"),
    ("priorityClassName", "podPriorityClassName", "priorityClassName"),
    ("securityContext", "securityContext", "securityContext"),
    ("podResources", "podResources", "resources"),
    ("resourceClaims", "resourceClaims", "resourceClaims"),
)
# Fields a steps or DAG template (the boundary of the templates it calls) hands down.
BOUNDARY_FIELDS = ("nodeSelector", "affinity", "tolerations")


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == [] or value == {}


def _merge_list(base: list[Any], patch: list[Any], key: str, item_keys: dict[str, str]) -> list[Any]:
    """A strategic merge of two lists of objects keyed by ``key``: patch items replace-merge base
    items with the same key, base items the patch does not name stay."""
    out = list(base)
    for item in patch:
        k = item.get(key) if isinstance(item, dict) else None
        for i, old in enumerate(out):
            if k is not None and isinstance(old, dict) and old.get(key) == k:
                out[i] = merge(old, item, item_keys)
                break
        else:
            out.append(item)
    return out


def merge(base: Any, patch: Any, list_keys: dict[str, str]) -> Any:
    """``patch`` merged over ``base`` as a strategic merge patch does (lists in ``list_keys`` by key)."""
    if not isinstance(base, dict) or not isinstance(patch, dict):
        return base if _empty(patch) else patch
    out = dict(base)
    for k, v in patch.items():
        if _empty(v):
            continue
        old = out.get(k)
        if isinstance(v, list) and isinstance(old, list) and k in list_keys:
            item_keys = CONTAINER_MERGE_KEYS if k in ("initContainers", "sidecars") else {}
            out[k] = _merge_list(old, v, list_keys[k], item_keys)
        elif isinstance(v, dict) and isinstance(old, dict):
            out[k] = merge(old, v, CONTAINER_MERGE_KEYS if k in CONTAINER_FIELDS else {})
        else:
            out[k] = v
    return out


def template_type(template: dict[str, Any]) -> str | None:
    return next((t for t in TEMPLATE_TYPES if template.get(t) is not None), None)


def with_defaults(template: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """The template after ``templateDefaults`` (operator.go ``mergedTemplateDefaultsInto``)."""
    if not defaults:
        return template
    kind = template_type(template)
    applicable = {k: v for k, v in defaults.items() if k not in TEMPLATE_TYPES or k == kind}
    merged = merge(applicable, template, TEMPLATE_MERGE_KEYS)
    return merged if isinstance(merged, dict) else template


@dataclass(frozen=True, slots=True)
class ArgoPod:
    """What the pod of a template is made of: its spec as the rules read it (the template's own
    keys, plus what the controller adds), its metadata, where inherited fields come from (spec key,
    absolute pointer of the value), and what cannot be known."""

    spec: dict[str, Any]
    metadata: dict[str, Any]
    origins: tuple[tuple[str, str], ...]
    patched: bool
    scheduling_known: bool


def argo_pod(template: dict[str, Any], workflow_spec: Any, at: str, workflow_at: str) -> ArgoPod:
    """The pod the controller builds from ``template`` (at pointer ``at``) of a workflow whose spec
    is ``workflow_spec`` (at ``workflow_at``)."""
    wf = as_dict(workflow_spec)
    defaults = as_dict(wf.get("templateDefaults"))
    merged = with_defaults(template, defaults)
    origins: dict[str, str] = {
        k: pointer.join(workflow_at, ("templateDefaults", k))
        for k in merged if k not in template or _empty(template[k])
    }
    boundary = [t for t in (as_dict(x) for x in _templates(wf)) if template_type(t) in ("steps", "dag")]
    unknown = False
    added: dict[str, Any] = {}
    dropped: set[str] = set()
    for tmpl_key, wf_key, pod_key in INHERITED:
        value = merged.get(tmpl_key)
        source = origins.pop(tmpl_key, pointer.join(at, (tmpl_key,)))
        if _empty(value) and tmpl_key in BOUNDARY_FIELDS and any(not _empty(b.get(tmpl_key)) for b in boundary):
            unknown = True
        if _empty(value) and not _empty(wf.get(wf_key)):
            value, source = wf[wf_key], pointer.join(workflow_at, (wf_key,))
        if tmpl_key != pod_key and tmpl_key in merged:
            dropped.add(tmpl_key)
        if _empty(value):
            continue
        if source != pointer.join(at, (pod_key,)):
            origins[pod_key] = source
        if value is not merged.get(pod_key):
            added[pod_key] = value
    spec = merged
    if added or dropped:  # a new mapping: the object itself is never changed
        spec = {k: v for k, v in merged.items() if k not in dropped}
        spec.update(added)
    meta = as_dict(spec.get("metadata"))
    pod_meta = as_dict(wf.get("podMetadata"))
    metadata = meta
    if pod_meta:
        metadata = {
            part: {**as_dict(pod_meta.get(part)), **as_dict(meta.get(part))}
            for part in ("labels", "annotations") if pod_meta.get(part) or meta.get(part)
        }
    patched = any(not _empty(d.get("podSpecPatch")) for d in (template, wf, defaults))
    return ArgoPod(
        spec=spec,
        metadata=metadata,
        origins=tuple(sorted(origins.items())),
        patched=patched,
        scheduling_known=not (patched or unknown),
    )


def _templates(wf: dict[str, Any]) -> list[Any]:
    templates = wf.get("templates")
    return templates if isinstance(templates, list) else []
