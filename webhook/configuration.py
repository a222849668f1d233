"""The Validating and Mutating webhook configurations for a policy config, as deterministic YAML text.

The webhook ``rules`` list every kind gpuguard extracts pod templates from — the table in
policies/podspec.py plus the config's ``podTemplatePaths`` — and the DRA claim kinds
(ResourceClaim, ResourceClaimTemplate); the ``gpu-workload`` matchCondition looks for GPU requests
at every template location of those kinds, for the config's ``gpuResourceNames`` as well as the GPU
vendors' names, and lets every DRA claim through (its DeviceClass, selectors and devices are judged).
The namespaceSelector leaves out the config's ``exemptNamespaces``.  ``gpuguard webhook-config``
prints it; deploy/webhooks.yaml is this text for the deploy config (tests/deploy checks it is not stale).

Only ``policies`` is imported: the same text can feed other packaging (a Helm chart).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Sequence

from policies.config import EXEMPT_LABEL, Config
from policies.dra.objects import CLAIM_RESOURCES, GROUP, SERVED_VERSIONS
from policies.podspec import KSERVE_COMPONENT_KEYS, Location, WildcardOver, Workload, index_workloads
from policies.resources import DEFAULT_GPU_PREFIXES
from policies.signals import (
    CDI_ANNOTATION_PREFIX,
    DEVICE_ENV_NAMES,
    DEVICE_ENV_PREFIXES,
    DEVICE_LIST_MOUNT_DIR,
    HOST_PATH_MARKERS,
    IMAGE_MARKERS,
    NRI_CDI_DOMAIN,
)

SERVICE_NAME = "gpuguard"
SERVICE_NAMESPACE = "gpuguard"

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CEL_RESERVED = frozenset(
    {
        "as", "break", "const", "continue", "else", "false", "for", "function", "if", "import", "in",
        "let", "loop", "namespace", "null", "package", "return", "true", "var", "void", "while",
    }
)
# Container-like maps inside an Argo Workflows template (policies.podspec ``argo`` shape).
ARGO_SINGLE_CONTAINERS = ("container", "script")
ARGO_CONTAINER_LISTS = ("sidecars",)


class GenerationError(ValueError):
    pass


def _field(segment: str) -> str:
    if not _IDENT.match(segment) or segment in _CEL_RESERVED:
        raise GenerationError(f"pattern segment {segment!r} is not a CEL field name")
    return segment


def _guard(path: list[str]) -> str:
    """has() for every step below the root variable, outermost first."""
    return " && ".join(f"has({'.'.join(path[: i + 1])})" for i in range(1, len(path)))


def _items(collection: str, over: WildcardOver | None, pattern: tuple[str, ...]) -> str:
    """A CEL list of the values a ``*`` runs over."""
    if over == "list":
        return collection
    if over == "map":
        return f"{collection}.map(k, {collection}[k])"
    if over == "any":  # a config path: the schema is unknown, so take a list or a map's values
        return f"(type({collection}) == list ? {collection} : {collection}.map(k, {collection}[k]))"
    raise GenerationError(f"{'/'.join(pattern)}: the table does not say what its wildcard runs over")


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
    items = _items(".".join(outer), over, pattern)
    return f"({_guard(outer)} ? {items}{keep}.map(x, {select}) : [])"


def _label(workload: Workload) -> str:
    return f"{workload.kind}.{workload.group}" if workload.group else workload.kind


def _candidate_pattern(location: Location) -> tuple[str, ...]:
    if location.shape == "template":
        return (*location.pattern, "spec")
    return location.pattern  # podspec, component and Argo template: the map itself


def _kind_test(workload: Workload) -> str:
    for text in (workload.kind, workload.group):
        if "'" in text or "\\" in text:
            raise GenerationError(f"{text!r} cannot be quoted in CEL")
    if workload.group:
        return f"object.kind == '{workload.kind}' && object.apiVersion.startsWith('{workload.group}/')"
    return f"object.kind == '{workload.kind}' && !object.apiVersion.contains('/')"


def workloads(config: Config) -> list[Workload]:
    """The table's kinds, then the config's (a config entry for a table kind replaces it)."""
    return list(index_workloads(config.extra_workloads).values())


def _outer(location: Location) -> tuple[str, ...] | None:
    pattern = location.pattern
    return pattern[: pattern.index("*")] if "*" in pattern else None


def _shape_clashes(kinds: list[Workload]) -> frozenset[tuple[str, ...]]:
    """The collections a wildcard runs over as a list in one kind and as a map in another (an
    ElasticJob's ``spec.replicaSpecs`` map, a HyperPodPyTorchJob's list): a term for one shape
    fails on the other, so such terms are scoped to their kind."""
    shapes: dict[tuple[str, ...], set[str | None]] = {}
    for workload in kinds:
        for location in workload.locations:
            if (outer := _outer(location)) is not None:
                shapes.setdefault(outer, set()).add(location.wildcard)
    return frozenset(outer for outer, seen in shapes.items() if len(seen) > 1)


def _scoped(term: str, workload: Workload, location: Location, clashes: frozenset[tuple[str, ...]]) -> str:
    return f"({_kind_test(workload)} ? {term} : [])" if _outer(location) in clashes else term


def candidate_terms(config: Config) -> tuple[list[tuple[str, list[str]]], list[tuple[str, str]]]:
    """(CEL list term, kinds) for every pod-spec-like location, deduplicated, in table order; and
    (CEL test, kind) for objects that are always sent: embedded workloads (Katib trialSpec) and
    config paths CEL cannot follow."""
    terms: dict[str, list[str]] = {}
    always: list[tuple[str, str]] = []
    config_kinds = {(w.group, w.kind) for w in config.extra_workloads}
    table = workloads(config)
    clashes = _shape_clashes(table)
    for workload in table:
        for location in workload.locations:
            if location.shape == "object":
                path = ["object", *(_field(s) for s in location.pattern)]
                always.append((_guard(path), f"{_label(workload)}: embeds a whole workload; every one with it is sent"))
                continue
            try:
                term = _scoped(_term("object", _candidate_pattern(location), location.wildcard), workload,
                               location, clashes)
            except GenerationError as exc:
                if (workload.group, workload.kind) not in config_kinds:
                    raise
                always.append((_kind_test(workload), f"{_label(workload)}: {exc}; every one is sent"))
                continue
            kinds = terms.setdefault(term, [])
            if _label(workload) not in kinds:
                kinds.append(_label(workload))
    return list(terms.items()), list(dict.fromkeys(always))


def _metadata_terms(config: Config) -> list[str]:
    """A CEL list of the object's metadata and every pod template's metadata in the kinds of ``rules``."""
    own = "(has(object.metadata) ? [object.metadata] : [])"
    terms: list[str] = [own]
    table = workloads(config)
    clashes = _shape_clashes(table)
    for workload in table:
        for location in workload.locations:
            if location.shape != "template":
                continue
            try:
                term = _scoped(_term("object", (*location.pattern, "metadata"), location.wildcard), workload,
                               location, clashes)
            except GenerationError:
                continue  # such kinds are sent whole (candidate_terms)
            if term not in terms:
                terms.append(term)
    return [f"    {terms[0]}", *(f"    + {term}" for term in terms[1:])]


def resource_keys(config: Config) -> list[str]:
    keys = ["resources"]
    for workload in workloads(config):
        for location in workload.locations:
            if location.resources_key not in keys:
                keys.append(location.resources_key)
    return keys


def _quoted(items: Iterable[str]) -> str:
    return "[" + ", ".join(f"'{i}'" for i in items) + "]"


def _gpu_name_test(config: Config) -> str:
    tests = [f"n.startsWith('{p}')" for p in DEFAULT_GPU_PREFIXES]
    extra = [n for n in config.gpu_resource_names if not n.startswith(DEFAULT_GPU_PREFIXES)]
    if extra:
        for name in extra:
            if "'" in name or "\\" in name:
                raise GenerationError(f"gpuResourceNames: {name!r} cannot be quoted in CEL")
        tests.append(f"n in {_quoted(extra)}")
    return " || ".join(tests)


def gpu_expression(config: Config, gpu_name_test: str | None = None) -> str:
    """The ``gpu-workload`` CEL expression; ``gpu_name_test`` replaces the test of a resource name
    ``n`` (a packaging that computes it at install time passes its own)."""
    terms, always = candidate_terms(config)
    lines: list[str] = ["("]
    claim_kinds = _quoted(kind for kind, _ in CLAIM_RESOURCES)
    lines.append("  // DRA ResourceClaims and ResourceClaimTemplates: judged like pod templates")
    lines.append(f"  (object.kind in {claim_kinds} && object.apiVersion.startsWith('{GROUP}/')) ||")
    for test, why in always:
        lines.append(f"  // {why}")
        lines.append(f"  ({test}) ||")
    lines.append("  // Every place a pod spec or a container-like component lives in the kinds of `rules`;")
    lines.append("  // absent locations contribute nothing, extra candidates are harmless.")
    lines.append("  (")
    for i, (term, kinds) in enumerate(terms):
        joiner = "  " if i == 0 else "+ "
        lines.append(f"    // {', '.join(kinds)}")
        lines.append(f"    {joiner}{term}")
    env = " || ".join([*(f"e.name == '{n}'" for n in DEVICE_ENV_NAMES),
                       *(f"e.name.startsWith('{p}')" for p in DEVICE_ENV_PREFIXES)])
    device_names = _quoted((*DEVICE_ENV_NAMES, *DEVICE_ENV_PREFIXES))
    prefix_test = " || ".join(f"f.prefix.startsWith('{p}')" for p in DEVICE_ENV_PREFIXES)
    paths = " || ".join(f"v.hostPath.path.contains('{m}')" for m in HOST_PATH_MARKERS)
    sub_paths = " || ".join(f"m.subPath.contains('{m}')" for m in HOST_PATH_MARKERS)
    singles = " + ".join(f"(has(s.{k}) ? [s.{k}] : [])" for k in ARGO_SINGLE_CONTAINERS)
    lists = " + ".join(f"(has(s.{k}) ? s.{k} : [])" for k in ARGO_CONTAINER_LISTS)
    mount_dir = posixpath.basename(DEVICE_LIST_MOUNT_DIR)
    lines += [
        "  ).exists(s,",
        "    // Dynamic Resource Allocation claims",
        "    (has(s.resourceClaims) && size(s.resourceClaims) > 0)",
        "    // device nodes mounted from the host (coarse: the webhook checks the normalised path)",
        f"    || (has(s.volumes) && s.volumes.exists(v, has(v.hostPath) && has(v.hostPath.path) && ({paths})))",
        "    // containers, init and ephemeral containers, the map itself (a component) and KServe model components",
        "    || ((has(s.containers) ? s.containers : []) + (has(s.initContainers) ? s.initContainers : [])",
        "        + (has(s.ephemeralContainers) ? s.ephemeralContainers : []) + [s]",
        f"        + s.filter(k, k in {_quoted(KSERVE_COMPONENT_KEYS)}).map(k, s[k])",
        "        // Argo Workflows templates: their container, script, sidecars and containerSet containers",
        f"        + {singles} + {lists}",
        "        + (has(s.containerSet) && has(s.containerSet.containers) ? s.containerSet.containers : [])",
        "      ).exists(c,",
        f"        {_quoted(resource_keys(config))}.exists(r, r in c",
        "          && ['limits', 'requests'].exists(q, q in c[r]",
        f"            && c[r][q].exists(n, {gpu_name_test or _gpu_name_test(config)})))",
        "        // ways to reach devices without requesting them (policies/signals.py): device variables,",
        "        // envFrom sources that may define one, images that set one, privileged mode, mounts where",
        "        // the runtime reads device requests or that reach device nodes by subPath",
        f"        || (has(c.env) && c.env.exists(e, has(e.name) && ({env})))",
        "        || (has(c.envFrom) && c.envFrom.exists(f, !has(f.prefix)",
        f"            || {device_names}.exists(n, n.startsWith(f.prefix)) || {prefix_test}))",
        f"        || (has(c.image) && {_quoted(IMAGE_MARKERS)}.exists(i, c.image.contains(i)))",
        "        || (has(c.securityContext) && has(c.securityContext.privileged)",
        "            && c.securityContext.privileged == true)",
        "        || (has(c.volumeMounts) && c.volumeMounts.exists(m,",
        f"            (has(m.mountPath) && m.mountPath.contains('{mount_dir}'))",
        f"            || (has(m.subPath) && ({sub_paths})) || has(m.subPathExpr))))",
        "  )",
        "  // CDI annotations on the object or a pod template ask the runtime for devices directly",
        "  || (",
        *_metadata_terms(config),
        "  ).exists(m, has(m.annotations) && m.annotations.exists(k,",
        f"      k.startsWith('{CDI_ANNOTATION_PREFIX}') || k.startsWith('{NRI_CDI_DOMAIN}')))",
        ")",
    ]
    return "\n".join(lines)


def _rules(config: Config) -> list[str]:
    out = []
    for w in workloads(config):
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


def _dra_rules() -> list[str]:
    return [
        f"      - apiGroups: [{GROUP}]  # ResourceClaim, ResourceClaimTemplate",
        f"        apiVersions: [{', '.join(SERVED_VERSIONS)}]",
        f"        resources: [{', '.join(plural for _, plural in CLAIM_RESOURCES)}]",
        "        operations: [CREATE, UPDATE]",
        '        scope: "Namespaced"',
    ]


class Layout:
    """The parts of the text that depend on how gpuguard is installed; this one is the kustomize
    install's (deploy/webhooks.yaml).  webhook/configuration_helm.py writes the Helm chart's."""

    def header(self) -> list[str]:
        return [
            "# Generated by `gpuguard webhook-config` from policies/podspec.py WORKLOADS and the policy config;",
            "# do not edit by hand (except caBundle, which `gpuguard certs --inject` writes).",
            "#",
            "# The mutating webhook applies the fixes listed under `mutate:` in the policy config; the",
            "# validating webhook denies errors and returns warnings.",
        ]

    def metadata(self) -> list[str]:
        return ["  name: gpuguard", "  labels:", "    app.kubernetes.io/name: gpuguard"]

    def client_config(self, path: str) -> list[str]:
        return [
            "      # caBundle is written by `gpuguard certs ... --inject deploy/webhooks.yaml`",
            "      service:",
            f"        name: {SERVICE_NAME}",
            f"        namespace: {SERVICE_NAMESPACE}",
            f"        path: {path}",
            "        port: 443",
        ]

    def timeout(self) -> list[str]:
        return ["    timeoutSeconds: 5"]

    def validating_failure_policy(self) -> list[str]:
        return [
            "    # Ignore: an outage or an engine bug of gpuguard must not block every GPU workload of",
            "    # the cluster (findings are still denied while it answers). Set Fail to enforce strictly.",
            "    failurePolicy: Ignore",
        ]

    def namespace_selector(self, config: Config) -> list[str]:
        by_name = []
        if config.exempt_namespaces:
            by_name = [
                "        - key: kubernetes.io/metadata.name",
                "          operator: NotIn",
                f"          values: [{', '.join(sorted(config.exempt_namespaces))}]",
            ]
        return [
            *exempt_label_lines(),
            "    # The config's exemptNamespaces are never sent to the webhook either: keep that list to",
            "    # namespaces no tenant can create (a tenant who creates one of that name is exempt).",
            "    namespaceSelector:",
            "      matchExpressions:",
            *exempt_label_selector(),
            *by_name,
        ]

    def gpu_name_test(self, config: Config) -> str:
        return _gpu_name_test(config)


def exempt_label_lines() -> list[str]:
    return [
        f"    # Namespaces an administrator labels {EXEMPT_LABEL}=true (GPU infrastructure: GPU Operator,",
        "    # device plugin, DRA driver) are never sent to the webhook; only those who may update",
        "    # namespaces can set the label.",
    ]


def exempt_label_selector() -> list[str]:
    return [
        f"        - key: {EXEMPT_LABEL}",
        "          operator: NotIn",
        '          values: ["true"]',
    ]


def _webhook_configuration(
    config: Config, layout: Layout, kind: str, name: str, path: str, policy_lines: Sequence[str]
) -> list[str]:
    expression = gpu_expression(config, layout.gpu_name_test(config))
    indented = [("          " + line) if line else "" for line in expression.splitlines()]
    return [
        "apiVersion: admissionregistration.k8s.io/v1",
        f"kind: {kind}",
        "metadata:",
        *layout.metadata(),
        "webhooks:",
        f"  - name: {name}",
        "    clientConfig:",
        *layout.client_config(path),
        "    admissionReviewVersions: [v1]",
        "    sideEffects: None",
        *layout.timeout(),
        *policy_lines,
        "    matchPolicy: Equivalent",
        *layout.namespace_selector(config),
        "    # The kinds gpuguard extracts pod templates from (policies/podspec.py WORKLOADS and the",
        "    # config's podTemplatePaths), and DRA claims (policies/dra/objects.py CLAIM_RESOURCES).",
        "    rules:",
        *_rules(config),
        *_dra_rules(),
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
        *indented,
    ]


def render(config: Config | None = None, layout: Layout | None = None) -> str:
    """Both webhook configurations for ``config``, as YAML text (deterministic)."""
    config = config or Config()
    layout = layout or Layout()
    mutating = _webhook_configuration(
        config,
        layout,
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
        config,
        layout,
        "ValidatingWebhookConfiguration",
        "validate.gpuguard.io",
        "/validate",
        layout.validating_failure_policy(),
    )
    return "\n".join([*layout.header(), *mutating, "---", *validating]) + "\n"
