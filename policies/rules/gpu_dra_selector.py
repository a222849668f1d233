"""gpu-dra-selector: a CEL device selector is rejected, or reads devices the way they are not published.

DRA requests (and DeviceClasses) pick devices with CEL expressions.  gpuguard compiles each one as
the API server does (pkg/apis/resource/validation ``validateCELSelector`` and
k8s.io/dynamic-resource-allocation cel/compile.go, see ``policies.dra.cel``): longer than 10 KiB,
not parseable, not type-correct, not boolean, or estimated costlier than 1,000,000 is rejected with
the API server's message.

What the API server never checks (kubernetes#125826) is that the attributes a selector reads exist and
hold what it assumes.  gpuguard compares each ``device.attributes[...]``/``device.capacity[...]`` it
reads with what the devices of the request's DeviceClass publish — the cluster's ResourceSlices, or
what NVIDIA's GPU driver publishes when the snapshot has none (``policies.dra.published``):

* an attribute no such device publishes — a typo, a wrong domain, or one the driver removed (NVIDIA's
  ``index``, ``minor`` and ``parentIndex`` in v25.8.0, ``pcieBusID`` in v25.12.0): reading it is a CEL
  runtime error on every device of the class (the scheduler fails allocation with ``CEL runtime
  error: no such key``), or behind ``has()`` a selector that never matches;
* a comparison with a literal of the wrong type: a ``version`` attribute (``driverVersion``,
  ``cudaDriverVersion``) compared with a string or a number never equals it and cannot be ordered
  against it (use ``compareTo(semver("570.124.6"))``), likewise a capacity (a quantity:
  ``compareTo(quantity("40Gi"))``) and an int, string or bool compared across types;
* a version method on a non-version attribute, or a string method on a non-string one.

Severity is graded: errors when the selector is rejected or the cluster's ResourceSlices prove the
mistake; warnings when gpuguard's CEL may differ from Kubernetes' (the finding says so) or the
judgement rests on the driver's published attribute list rather than the cluster's slices, and for
``has()``-guarded reads.  Judged on ResourceClaims, ResourceClaimTemplates and DeviceClasses (their
selectors, at the expression), and on a pod's claims resolved to the cluster's (attribute checks only:
the API server accepted those).

Failing (NVIDIA/k8s-dra-driver-gpu@22407113 demo/specs/quickstart/v1/gpu-test6.yaml: ``index`` is no
longer published since v25.8.0, kubernetes-sigs/dra-driver-nvidia-gpu#744)::

    selectors:
    - cel:
        expression: |
          device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^.*a100.*$')
          &&
          (device.attributes['gpu.nvidia.com'].index == 0 ||
          device.attributes['gpu.nvidia.com'].index == 2)

Passing (NVIDIA test/e2e/framework/specs/driver-version.yaml.tmpl, with the version filled in)::

    selectors:
    - cel:
        expression: device.attributes["gpu.nvidia.com"].driverVersion.compareTo(semver("570.124.6")) >= 0
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from policies import pointer
from policies.applicability import Applies, has_dra_claims
from policies.dra.cel import AttributeRef, CompiledSelector, compile_selector
from policies.dra.facts import DraView
from policies.dra.objects import DeviceClass, Selector
from policies.dra.published import (
    Published,
    class_drivers,
    class_published,
    known_driver_domains,
    published,
    removed_attribute,
    selector_drivers,
)
from policies.dra.reading import is_dra
from policies.dra.slices import parse_device_class
from policies.dra.subjects import Subject, alternatives, object_subject, unallocated_pod_subjects
from policies.rule import NeedsFacts, ObjectContext, Option, RuleContext
from policies.types import RelPath, Severity, Violation
from policies.wording import did_you_mean, suggest

ID = "gpu-dra-selector"
DEFAULT_SEVERITY = Severity.ERROR
NEEDS_FACTS: NeedsFacts = "partly"
NEEDS_SCHEDULING: bool = False
APPLIES: Applies = has_dra_claims  # judges the pod's claims (spec.resourceClaims) only
FIXABLE = False
MUTATION_SAFE = False
SUMMARY = (
    "A DRA CEL selector is rejected (syntax, type, not boolean, too long or costly), or reads an attribute "
    "the class's devices do not publish or compares it with the wrong type."
)
REMEDIATION = (
    "Fix the expression: read attributes the driver publishes (`kubectl get resourceslices -o yaml`), guard "
    "optional ones with has(), and compare versions with compareTo(semver(...)) and capacities with "
    "compareTo(quantity(...))."
)
OPTIONS: tuple[Option, ...] = ()

_NUMBERS = frozenset({"int", "uint", "double"})
_COMPATIBLE = {"int": _NUMBERS, "string": frozenset({"string"}), "bool": frozenset({"bool"})}
_VERSION_METHODS = frozenset({"compareTo", "isGreaterThan", "isLessThan", "major", "minor", "patch"})
_STRING_METHODS = frozenset(
    {"lowerAscii", "upperAscii", "matches", "startsWith", "endsWith", "contains", "split", "trim", "replace",
     "indexOf", "lastIndexOf", "substring", "charAt", "find", "findAll"}
)
_HOW = {
    "version": 'compare versions with compareTo: {ref}.compareTo(semver("1.2.3")) >= 0',
    "quantity": 'compare quantities with compareTo: {ref}.compareTo(quantity("40Gi")) >= 0',
}


def _ref_text(ref: AttributeRef) -> str:
    return f'device.{ref.kind}["{ref.domain}"].{ref.name}'


def _grade(pub: Published, guarded: bool = False) -> Severity:
    return Severity.ERROR if pub.source == "slices" and not guarded else Severity.WARNING


Elsewhere = Callable[[str, str], list[str]]  # (kind, qualified name) → other classes whose devices have it


def _close(name: str, known: Iterable[str]) -> str | None:
    """A published name in the same domain that looks like a typo of ``name``."""
    domain, _, ident = name.rpartition("/")
    same = {k.rpartition("/")[2]: k for k in known if k.rpartition("/")[0] == domain}
    close = suggest(ident, same, cutoff=0.75)
    return same[close[0]] if close else None


def _missing(ref: AttributeRef, name: str, pub: Published, where: str, elsewhere: Elsewhere) -> tuple[str, Severity]:
    what = "attribute" if ref.kind == "attributes" else "capacity"
    known = pub.attributes if ref.kind == "attributes" else (pub.capacities or frozenset())
    removed = removed_attribute(name) if ref.kind == "attributes" else None
    if removed is not None:
        driver, gone = removed
        text = f"{where} reads attribute {name}, which the {driver} driver stopped publishing in {gone.release}"
        text += f" ({gone.source}{'; use ' + gone.instead if gone.instead else ''})"
        if pub.source == "slices":
            text += "; no device in the cluster's ResourceSlices publishes it"
    else:
        text = f"{where} reads {what} {name}, which {pub.describe()}"
        others = elsewhere(ref.kind, name)
        close = _close(name, known)
        if others:
            text += f" (devices of {', '.join(others)} do: is that the class meant?)"
        elif close:
            text += f" ({did_you_mean([close])})"
    if ref.presence_test:
        text += "; the has()/in test is always false, so the selector never matches"
    else:
        text += (
            "; wherever the selector reads it, that is a CEL runtime error (no such key) and the scheduler fails "
            "the allocation"
        )
    return text, _grade(pub, ref.presence_test)


def _mistyped(ref: AttributeRef, name: str, kinds: frozenset[str], where: str) -> str | None:
    kind = next(iter(kinds)) if len(kinds) == 1 else None
    if ref.kind == "capacity":
        kind = "quantity"
    if kind is None:
        return None
    literal = next((lit for lit in ref.compared_with if lit not in _COMPATIBLE.get(kind, frozenset())), None)
    if literal is not None:
        how = _HOW.get(kind, "compare it with a literal of its own type").format(ref=_ref_text(ref))
        if kind in _HOW:  # Kubernetes' Semver and Quantity types compare only with their own kind
            effect = "which is a CEL runtime error (no such overload) wherever the selector reaches it"
        else:
            effect = "which never matches (== between different types is false; <, > are CEL runtime errors)"
        return f"{where} compares {name}, a {kind}, with a {literal} literal, {effect}; {how}"
    for method in ref.methods:
        if method in _VERSION_METHODS and kind not in ("version", "quantity"):
            return f"{where} calls {method}() on {name}, a {kind}: it has no such method (a CEL error)"
        if method in _STRING_METHODS and kind != "string":
            return f"{where} calls {method}() on {name}, a {kind}, not a string: a CEL error"
    return None


def _reference_findings(
    compiled: CompiledSelector, pub: Published, where: str, elsewhere: Elsewhere
) -> Iterator[tuple[str, Severity]]:
    seen: set[tuple[str, str]] = set()
    for ref in compiled.references.attributes:
        name = ref.qualified_name
        if name is None or (ref.kind, name) in seen or not pub.judges(ref.domain):
            continue
        if ref.kind == "attributes":
            kinds = pub.attributes.get(name)
        else:
            kinds = None if pub.capacities is None or name not in pub.capacities else frozenset({"quantity"})
            if pub.capacities is None:
                typed = _mistyped(ref, name, frozenset({"quantity"}), where)
                if typed is not None:
                    seen.add((ref.kind, name))
                    yield typed, Severity.WARNING
                continue
        if kinds is None:
            seen.add((ref.kind, name))
            yield _missing(ref, name, pub, where, elsewhere)
            continue
        typed = _mistyped(ref, name, kinds, where)
        if typed is not None:
            seen.add((ref.kind, name))
            yield typed, _grade(pub)


def _compile_finding(compiled: CompiledSelector, where: str) -> tuple[str, Severity] | None:
    if compiled.issue is None:
        return None
    text = f"{where}: {compiled.issue.detail}"
    if compiled.parity_uncertain:
        reasons = "; ".join(compiled.uncertain_reasons)
        return f"{text} — gpuguard's CEL may differ from Kubernetes' here ({reasons}), so this is a warning", (
            Severity.WARNING
        )
    return f"{text}; the API server rejects it", Severity.ERROR


def _selectors(
    selectors: Iterable[Selector],
    pub: Published | None,
    label: str,
    compile_errors: bool,
    elsewhere: Elsewhere = lambda kind, name: [],
) -> Iterator[tuple[str, Severity, str]]:
    """(message, severity, pointer of the expression) per problem."""
    for i, selector in enumerate(selectors):
        compiled = compile_selector(selector.expression)
        where = f"{label} selector #{i}"
        found = _compile_finding(compiled, where)
        if found is not None:
            if compile_errors:
                yield found[0], found[1], selector.pointer
            continue
        if pub is not None:
            for message, severity in _reference_findings(compiled, pub, where, elsewhere):
                yield message, severity, selector.pointer


def _judge(subject: Subject, view: DraView, compile_errors: bool) -> Iterator[Violation]:
    if compile_errors:
        for problem in subject.spec.problems:
            if "/selectors" in problem.pointer:
                hint = " (`expression` belongs under `cel:`)" if problem.pointer.endswith("/cel") else ""
                yield Violation(
                    subject.say(f"{pointer.to_dotted(problem.pointer)}: {problem.message}{hint}; the API server "
                                "rejects the claim"),
                    subject.path(problem.pointer),
                    anchor=subject.anchor,
                )
    for alt in alternatives(subject.spec):
        device_class = view.device_class(alt.device_class_name)
        pub = class_published(device_class, view) if device_class is not None else None
        if pub is None:  # the class is unknown or selects nothing known: judge by the domains read
            drivers = selector_drivers(s.expression for s in alt.selectors)
            inferred = not drivers
            if inferred:
                drivers = known_driver_domains(s.expression for s in alt.selectors)
            pub = published(drivers, view, inferred)
        label = f"request {alt.qualified_name} (class {alt.device_class_name})"

        def elsewhere(kind: str, name: str, own: str = alt.device_class_name) -> list[str]:
            return _other_classes(view, own, kind, name)

        for message, severity, at in _selectors(alt.selectors, pub, label, compile_errors, elsewhere):
            yield Violation(subject.say(message), subject.path(at), anchor=subject.anchor, severity=severity)


def _other_classes(view: DraView, own: str, kind: str, name: str) -> list[str]:
    """Other classes of the cluster whose devices publish ``name`` (at most three)."""
    found = []
    for class_name in view.class_names():
        other = view.device_class(class_name)
        if class_name == own or other is None:
            continue
        pub = class_published(other, view)
        if pub is None or pub.device_class is None:
            continue
        names = pub.attributes if kind == "attributes" else (pub.capacities or frozenset())
        if name in names:
            found.append(f"class {class_name}")
    return found[:3]


def _judge_class(device_class: DeviceClass, view: DraView) -> Iterator[Violation]:
    for problem in device_class.problems:
        if "/selectors" in problem.pointer:
            yield Violation(f"{problem.message}; the API server rejects the class", _split(problem.pointer),
                            anchor="object")
    pub = published(class_drivers(device_class, view), view)
    label = f"DeviceClass {device_class.name}"
    for message, severity, at in _selectors(device_class.selectors, pub, label, True):
        yield Violation(message, _split(at), anchor="object", severity=severity)


def _split(pointer_text: str) -> RelPath:
    return tuple(pointer.split(pointer_text))


def check(ctx: RuleContext) -> Iterator[Violation]:
    for subject in unallocated_pod_subjects(ctx.pod, ctx.namespace, ctx.dra):
        yield from _judge(subject, ctx.dra, compile_errors=False)


def check_object(ctx: ObjectContext) -> Iterator[Violation]:
    subject = object_subject(ctx.obj)
    if subject is not None:
        if not subject.allocated:
            yield from _judge(subject, ctx.dra, compile_errors=True)
        return
    if is_dra(ctx.obj) and ctx.obj.get("kind") == "DeviceClass":
        yield from _judge_class(parse_device_class(ctx.obj), ctx.dra)
