"""Write deploy/webhooks.yaml from the extractor's table (policies/podspec.py WORKLOADS).

The webhook ``rules`` list every kind gpuguard extracts pod templates from, and the
``gpu-workload`` matchCondition looks for GPU requests at every template location of that table,
so both follow the table. Run after changing WORKLOADS (the test suite fails until you do):

    python deploy/generate_webhooks.py
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))

from policies.config import Config  # noqa: E402
from policies.podspec import KSERVE_COMPONENT_KEYS, WORKLOADS, Location, WildcardOver, Workload  # noqa: E402
from policies.resources import DEFAULT_GPU_PREFIXES  # noqa: E402
from policies.signals import DEVICE_ENV_NAMES, HOST_PATH_MARKERS  # noqa: E402

OUTPUT = HERE / "webhooks.yaml"

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CEL_RESERVED = frozenset(
    {
        "as", "break", "const", "continue", "else", "false", "for", "function", "if", "import", "in",
        "let", "loop", "namespace", "null", "package", "return", "true", "var", "void", "while",
    }
)


class GenerationError(ValueError):
    pass


def _field(segment: str) -> str:
    if not _IDENT.match(segment) or segment in _CEL_RESERVED:
        raise GenerationError(f"pattern segment {segment!r} is not a CEL field name")
    return segment


def _guard(path: list[str]) -> str:
    """has() for every step below the root variable, outermost first."""
    return " && ".join(f"has({'.'.join(path[: i + 1])})" for i in range(1, len(path)))


def _term(root: str, pattern: tuple[str, ...], over: WildcardOver | None = None) -> str:
    """A CEL list of the maps found at ``pattern`` under ``root`` (empty when absent)."""
    if pattern.count("*") > 1:
        raise GenerationError(f"{'/'.join(pattern)}: more than one wildcard cannot be flattened in CEL")
    if "*" not in pattern:
        path = [root, *(_field(s) for s in pattern)]
        if len(path) == 1:
            return f"[{root}]"
        return f"({_guard(path)} ? [{'.'.join(path)}] : [])"
    star = pattern.index("*")
    if star == 0:
        raise GenerationError(f"{'/'.join(pattern)}: a wildcard must follow a named key")
    outer = [root, *(_field(s) for s in pattern[:star])]
    inner = ["x", *(_field(s) for s in pattern[star + 1 :])]
    select = ".".join(inner)
    keep = f".filter(x, {_guard(inner)})" if len(inner) > 1 else ""
    collection = ".".join(outer)
    if over == "list":
        items = collection
    elif over == "map":
        items = f"{collection}.map(k, {collection}[k])"
    else:
        raise GenerationError(f"{'/'.join(pattern)}: the table does not say what its wildcard runs over")
    return f"({_guard(outer)} ? {items}{keep}.map(x, {select}) : [])"


def _label(workload: Workload) -> str:
    return f"{workload.kind}.{workload.group}" if workload.group else workload.kind


def _candidate_pattern(location: Location) -> tuple[str, ...]:
    if location.shape == "template":
        return (*location.pattern, "spec")
    return location.pattern  # podspec and component: the map itself


def candidate_terms() -> list[tuple[str, list[str]]]:
    """(CEL list term, kinds) for every pod-spec-like location, deduplicated, in table order."""
    terms: dict[str, list[str]] = {}
    for workload in WORKLOADS:
        for location in workload.locations:
            if location.shape == "object":
                continue
            term = _term("object", _candidate_pattern(location), location.wildcard)
            kinds = terms.setdefault(term, [])
            if _label(workload) not in kinds:
                kinds.append(_label(workload))
    return list(terms.items())


def embedded_object_terms() -> list[tuple[str, str]]:
    """Objects that embed a whole workload (Katib trialSpec) are always sent to the webhook."""
    out = []
    for workload in WORKLOADS:
        for location in workload.locations:
            if location.shape == "object":
                path = ["object", *(_field(s) for s in location.pattern)]
                out.append((_guard(path), _label(workload)))
    return out


def resource_keys() -> list[str]:
    keys = ["resources"]
    for workload in WORKLOADS:
        for location in workload.locations:
            if location.resources_key not in keys:
                keys.append(location.resources_key)
    return keys


def _quoted(items: list[str] | tuple[str, ...]) -> str:
    return "[" + ", ".join(f"'{i}'" for i in items) + "]"


def gpu_expression() -> str:
    lines: list[str] = ["("]
    for guard, kind in embedded_object_terms():
        lines.append(f"  // {kind}: embeds a whole workload; every one with it is sent")
        lines.append(f"  ({guard}) ||")
    lines.append("  // Every place a pod spec or a container-like component lives in the kinds of `rules`;")
    lines.append("  // absent locations contribute nothing, extra candidates are harmless.")
    lines.append("  (")
    for i, (term, kinds) in enumerate(candidate_terms()):
        joiner = "  " if i == 0 else "+ "
        lines.append(f"    // {', '.join(kinds)}")
        lines.append(f"    {joiner}{term}")
    prefixes = " || ".join(f"n.startsWith('{p}')" for p in DEFAULT_GPU_PREFIXES)
    env = " || ".join(f"e.name == '{n}'" for n in DEVICE_ENV_NAMES)
    paths = " || ".join(f"v.hostPath.path.contains('{m}')" for m in HOST_PATH_MARKERS)
    lines += [
        "  ).exists(s,",
        "    // Dynamic Resource Allocation claims",
        "    (has(s.resourceClaims) && size(s.resourceClaims) > 0)",
        "    // device nodes mounted from the host (coarse: the webhook checks the normalised path)",
        f"    || (has(s.volumes) && s.volumes.exists(v, has(v.hostPath) && has(v.hostPath.path) && ({paths})))",
        "    // containers, init containers, the map itself (a component) and KServe model components",
        "    || ((has(s.containers) ? s.containers : []) + (has(s.initContainers) ? s.initContainers : []) + [s]",
        f"        + s.filter(k, k in {_quoted(KSERVE_COMPONENT_KEYS)}).map(k, s[k])",
        "      ).exists(c,",
        f"        {_quoted(resource_keys())}.exists(r, r in c",
        "          && ['limits', 'requests'].exists(q, q in c[r]",
        f"            && c[r][q].exists(n, {prefixes})))",
        f"        || (has(c.env) && c.env.exists(e, has(e.name) && ({env}))))",
        "  )",
        ")",
    ]
    return "\n".join(lines)


def _rules() -> list[str]:
    out = []
    for w in WORKLOADS:
        group = '""' if w.group == "" else w.group
        # `kubectl debug` adds ephemeral containers through pods/ephemeralcontainers (an UPDATE
        # whose object is the whole Pod): a debug container must not get GPUs by environment.
        resources = [w.resource]
        if (w.group, w.kind) == ("", "Pod"):
            resources.append(f"{w.resource}/ephemeralcontainers")
        out += [
            f"      - apiGroups: [{group}]  # {_label(w)}",
            f"        apiVersions: [{', '.join(w.versions)}]",
            f"        resources: [{', '.join(resources)}]",
            "        operations: [CREATE, UPDATE]",
            '        scope: "*"',
        ]
    return out


def _webhook_configuration(kind: str, name: str, path: str, policy_lines: list[str]) -> list[str]:
    expression = [("          " + line) if line else "" for line in gpu_expression().splitlines()]
    return [
        "apiVersion: admissionregistration.k8s.io/v1",
        f"kind: {kind}",
        "metadata:",
        "  name: gpuguard",
        "  labels:",
        "    app.kubernetes.io/name: gpuguard",
        "webhooks:",
        f"  - name: {name}",
        "    clientConfig:",
        "      # caBundle is written by `gpuguard certs ... --inject deploy/webhooks.yaml`",
        "      service:",
        "        name: gpuguard",
        "        namespace: gpuguard",
        f"        path: {path}",
        "        port: 443",
        "    admissionReviewVersions: [v1]",
        "    sideEffects: None",
        "    timeoutSeconds: 5",
        *policy_lines,
        "    matchPolicy: Equivalent",
        "    namespaceSelector:",
        "      matchExpressions:",
        "        - key: kubernetes.io/metadata.name",
        "          operator: NotIn",
        f"          values: [{', '.join(sorted(Config().exempt_namespaces))}]",
        "    # The kinds gpuguard extracts pod templates from (policies/podspec.py WORKLOADS).",
        "    rules:",
        *_rules(),
        "    # Only objects that ask for a GPU reach the webhook. All conditions must be true; a false",
        "    # one skips the webhook even when another fails to evaluate.",
        "    matchConditions:",
        "      - name: create-or-update",
        "        # `object` is null for DELETE and CONNECT; the next condition needs an object.",
        "        expression: \"request.operation == 'CREATE' || request.operation == 'UPDATE'\"",
        "      - name: not-being-deleted",
        "        # Finalizer removal on terminating objects is never judged (the webhook allows it too).",
        "        expression: >-",
        "          !has(object.metadata.deletionTimestamp)",
        "          && (oldObject == null || !has(oldObject.metadata.deletionTimestamp))",
        "      - name: gpu-workload",
        "        expression: |-",
        *expression,
    ]


def render() -> str:
    mutating = _webhook_configuration(
        "MutatingWebhookConfiguration",
        "mutate.gpuguard.io",
        "/mutate",
        [
            "    # Ignore: without the mutating webhook, objects are only not fixed; the validating one",
            "    # still reports.",
            "    failurePolicy: Ignore",
            "    # Run again if a later mutating webhook changes the object (adds a container, say).",
            "    reinvocationPolicy: IfNeeded",
        ],
    )
    validating = _webhook_configuration(
        "ValidatingWebhookConfiguration",
        "validate.gpuguard.io",
        "/validate",
        [
            "    # Ignore: an outage or an engine bug of gpuguard must not block every GPU workload of",
            "    # the cluster (findings are still denied while it answers). Set Fail to enforce strictly.",
            "    failurePolicy: Ignore",
        ],
    )
    header = [
        "# Generated by deploy/generate_webhooks.py from policies/podspec.py WORKLOADS; do not edit",
        "# by hand (except caBundle, which `gpuguard certs --inject` writes).",
        "#",
        "# The mutating webhook applies the fixes listed under `mutate:` in the policy config; the",
        "# validating webhook denies errors and returns warnings.",
    ]
    return "\n".join([*header, *mutating, "---", *validating]) + "\n"


def main() -> int:
    OUTPUT.write_text(render(), encoding="utf-8")
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
