"""Unrendered placeholders in the fields the rules judge: input errors, not GPU findings.

Manifests meant for ``envsubst`` (``nvidia.com/gpu: ${ACCELERATOR_QUANTITY}`` or the bare
``nvidia.com/gpu: $GPU_PER_NODE``), a shell or make ``$(VAR)``, a token a setup script replaces with
``sed`` (``nvidia.com/gpu: PLACEHOLDER_NUM_GPU_PER_NODE``, quantities only), or a Go/Helm/Jinja template whose
``{{ }}`` survived YAML parsing (a quoted ``"{{ .Values.gpus }}"``) hold no quantity or label value
yet.  Judging them would report a fractional GPU or a selector that matches no node; instead they
are reported as input errors with their position, like unrendered Helm templates, and the rules
skip the values (a container whose GPU count is a placeholder is taken to ask for GPUs).

Only quantities (container and pod-level resources) and node selection (``nodeSelector``, required
node affinity) are looked at: elsewhere ``$(VAR)`` is Kubernetes' own dependent-variable syntax
(``args: [--model=$(MODEL_ID)]``).  Argo Workflows substitutes ``{{inputs.parameters.x}}`` when it
creates the pod, so in its templates ``{{ }}`` is a value known only at run time, not an input error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from policies import patterns
from policies.podspec import PodTemplate
from policies.shapes import as_dict, as_list
from policies.types import RelPath

TERMS_PATH: RelPath = (
    "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"
)
# ``${VAR}`` and ``$VAR`` are what envsubst replaces ("references to environment variables of the form
# $VARIABLE or ${VARIABLE}", GNU gettext manual, "Invoking the envsubst program"); ``$(VAR)`` is
# make's and the shell's.  No quantity and no label value can hold a ``$``.
_DOLLAR = patterns.compile(r"\$\{[^}\n]*\}|\$\([A-Za-z_][A-Za-z0-9_]*\)|\$[A-Za-z_][A-Za-z0-9_]*")
_BRACES = patterns.compile(r"(?s)\{\{.*?\}\}")
# Where only a quantity belongs, a whole value that is a SCREAMING_SNAKE_CASE token
# (``PLACEHOLDER_NUM_GPU_PER_NODE``, which a setup script replaces with ``sed``) or a documentation
# placeholder in angle brackets (``<number-of-gpus>``) is one too: a quantity starts with a sign, a
# digit or a point (apimachinery resource.Quantity: ``<quantity> ::= <signedNumber><suffix>``), so
# neither can be one.  Label values may be such tokens, so node selection is not read this way.
_TOKEN = patterns.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|<[^<>\n]{1,100}>")


# Where node selection belongs, a value a document asks its reader to fill in: ``your-node-name``,
# ``YOUR_NODE`` (kubernetes.io's own "kubectl label nodes <your-node-name> …" convention, copied into
# manifests without the brackets), or one that says an overlay or a script replaces it
# (``replaced-by-kustomize`` in a kustomize base, ``changeme``).  A node or label value of that form is
# a placeholder, not a choice.
_DOC_PREFIXES = ("your-", "your_", "replaced-by-", "replaced_by_", "replace-me", "replace_me", "changeme", "change-me")


def _doc_placeholder(value: Any) -> str | None:
    if not isinstance(value, str) or len(value) > 128:
        return None
    return value if value.lower().startswith(_DOC_PREFIXES) else None


@dataclass(frozen=True, slots=True)
class Placeholder:
    path: RelPath  # relative to the pod spec
    text: str  # the placeholder as written
    what: str  # "quantity" | "node selector"


def placeholder_in(value: Any) -> str | None:
    """The first placeholder in a string value (any syntax), or None."""
    if not isinstance(value, str) or ("$" not in value and "{" not in value):  # both patterns need one
        return None
    found = _DOLLAR.search(value) or _BRACES.search(value)
    return found.group(0) if found else None


def quantity_placeholder_in(value: Any) -> str | None:
    """The placeholder in a value where a quantity belongs: any syntax ``placeholder_in`` knows, or
    a whole value that is a substitution token."""
    found = placeholder_in(value)
    return found if found is not None else _token(value)


def _token(value: Any) -> str | None:
    """The whole value, when it is a substitution token (``_TOKEN``)."""
    if not isinstance(value, str) or not value or len(value) > 128:
        return None
    first = value[0]
    if first != "<" and not ("A" <= first <= "Z" and "_" in value):  # what either alternative starts with
        return None  # every real quantity ("1", "500m", "16Gi") ends here, without a regex match
    return value if _TOKEN.fullmatch(value) else None


def requests_by_placeholder(container_resources: Mapping[str, Any], is_gpu: Callable[[str], bool]) -> bool:
    """Whether a container's limits or requests name a GPU whose quantity is still a placeholder: it
    will request GPUs once rendered (the placeholder itself is the input error)."""
    return any(
        isinstance(name, str) and is_gpu(name) and quantity_placeholder_in(value) is not None
        for _, value, name in ((p, v, p[-1]) for p, v in _resource_values(container_resources, ()))
    )


def _input_placeholder(value: Any, runtime_braces: bool) -> str | None:
    if not isinstance(value, str) or ("$" not in value and "{" not in value):  # both patterns need one
        return None
    found = _DOLLAR.search(value)
    if found:
        return str(found.group(0))
    if runtime_braces:
        return None
    braces = _BRACES.search(value)
    return braces.group(0) if braces else None


def _resource_values(resources: Mapping[str, Any], base: RelPath) -> Iterator[tuple[RelPath, Any]]:
    for which in ("limits", "requests"):
        for name, value in as_dict(resources.get(which)).items():
            yield (*base, which, name), value


def _selector_values(spec: Mapping[str, Any]) -> Iterator[tuple[RelPath, Any]]:
    for key, value in as_dict(spec.get("nodeSelector")).items():
        yield ("nodeSelector", key), key
        yield ("nodeSelector", key), value
    affinity = as_dict(as_dict(spec.get("affinity")).get("nodeAffinity"))
    required = as_dict(affinity.get("requiredDuringSchedulingIgnoredDuringExecution"))
    for t, term in enumerate(as_list(required.get("nodeSelectorTerms"))):
        for e, expr in enumerate(as_list(as_dict(term).get("matchExpressions"))):
            at = (*TERMS_PATH, t, "matchExpressions", e)
            expr = as_dict(expr)
            yield (*at, "key"), expr.get("key")
            for v, value in enumerate(as_list(expr.get("values"))):
                yield (*at, "values", v), value


def find_placeholders(pod: PodTemplate) -> list[Placeholder]:
    """Unrendered placeholders in the pod's quantities and node selection (input errors)."""
    runtime = pod.runtime_expressions
    found: list[Placeholder] = []
    candidates: list[tuple[RelPath, Any, str]] = []
    for c in pod.containers:
        candidates.extend((p, v, "quantity") for p, v in _resource_values(c.resources, c.resources_path))
    if pod.shape != "component":
        pod_level = as_dict(pod.spec.get("resources"))
        candidates.extend((p, v, "quantity") for p, v in _resource_values(pod_level, ("resources",)))
    if pod.scheduling_known or pod.shape == "argo":
        candidates.extend((p, v, "node selector") for p, v in _selector_values(pod.spec))
    for path, value, what in candidates:
        text = _input_placeholder(value, runtime)
        if text is None and what == "quantity":
            text = _token(value)
        elif text is None:
            text = _doc_placeholder(value)
        if text is not None:
            found.append(Placeholder(path, text, what))
    return found


def has_selector_values_unknown(pod: PodTemplate) -> bool:
    """Whether node selection holds any placeholder, an Argo run-time expression included."""
    return any(placeholder_in(v) or _doc_placeholder(v) for _, v in _selector_values(pod.spec))
