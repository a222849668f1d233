"""The NVIDIA container runtime's own start check: ``NVIDIA_REQUIRE_*``, ported exactly.

In its legacy mode the NVIDIA runtime hook collects requirements from the container's final
environment and ``nvidia-container-cli configure --require=…`` refuses to start the container when
one of them fails ("unsatisfied condition: cuda>=12.8, please update your driver …").  This module
is a line-by-line port of that decision, so gpuguard agrees with the runtime on every input:

* which requirements exist — NVIDIA/nvidia-container-toolkit@d34b3046
  ``internal/config/image/cuda_image.go`` (``GetRequirements``, ``HasDisableRequire``,
  ``IsLegacy``, ``legacyVersion``, ``parseMajorMinorVersion``) with ``vendor/github.com/Masterminds/
  semver/v3/version.go`` v3.5.0 (``NewVersion`` in its default coercing mode);
* how one requirement is evaluated — NVIDIA/libnvidia-container@5823754b ``src/cli/dsl.c``
  (``dsl_evaluate``, ``evaluate_rule``, ``dsl_compare_version``, ``dsl_compare_string``);
* which properties exist and what they are — NVIDIA/libnvidia-container@09df17a2
  ``src/cli/configure.c`` (rules ``cuda``, ``driver``, ``arch``, ``brand``; every requirement is
  evaluated for every visible GPU) and ``src/driver.c`` (``arch`` is ``"%u.%u"`` of the compute
  capability; ``brand`` is Quadro/Tesla/NVS/GRID/GeForce/TITAN, every other NVML brand "Unknown").

The one difference is that gpuguard may not know a property: a node's brand is never published
by GPU Feature Discovery, and labels can be missing.  Evaluation is therefore over *sets* of
possible outcomes — every way the unknown comparisons could come out, following the C control
flow — and a verdict is definite only when all of them agree.

Since NVIDIA Container Toolkit 1.18 the default runtime mode (JIT-CDI) checks no requirement at
all (NVIDIA/nvidia-container-toolkit commit 6149592b, issue #1470); callers say so in messages.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from policies import patterns
from policies.shapes import small_int

EXPR_MAX = 128  # dsl.c: the buffer an unsatisfied expression is formatted into
_UINTMAX_MAX = 2**64 - 1
_CUDA_REQUIRE_GREATER = "cuda>="

REQUIRE_PREFIX = "NVIDIA_REQUIRE_"
REQUIRE_JETPACK = "NVIDIA_REQUIRE_JETPACK"
REQUIRE_CUDA = "NVIDIA_REQUIRE_CUDA"
DISABLE_REQUIRE = "NVIDIA_DISABLE_REQUIRE"
CUDA_VERSION = "CUDA_VERSION"


class Cmp(enum.Enum):
    EQUAL = "="
    NOT_EQUAL = "!="
    LESS = "<"
    LESS_EQUAL = "<="
    GREATER = ">"
    GREATER_EQUAL = ">="


# dsl.c ``operators[]``, in its order: the first entry whose text starts with the operator
# characters written wins (``strncmp(ptr, op, n)``), so ``!`` alone means ``!=``.
_OPERATORS = (Cmp.EQUAL, Cmp.NOT_EQUAL, Cmp.LESS, Cmp.LESS_EQUAL, Cmp.GREATER, Cmp.GREATER_EQUAL)
_OPERATOR_CHARS = "<>=!"
PROPERTIES = ("cuda", "driver", "arch", "brand")  # configure.c ``rules[]``

# -1 in the C code: the expression is invalid and the container does not start.
INVALID = -1


def _ascii_lower(text: str) -> str:
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in text)


def _strtoumax(text: str, pos: int) -> tuple[int, int]:
    end = pos
    while end < len(text) and text[end].isdigit() and text[end].isascii():
        end += 1
    if end == pos:
        return 0, pos
    digits = text[pos:end].lstrip("0")
    # strtoumax saturates; past 20 digits the value is over UINTMAX_MAX anyway (and int() of
    # thousands of digits would raise).
    value = _UINTMAX_MAX if len(digits) > 20 else int(digits or "0")
    return (min(value, _UINTMAX_MAX), end)


def _skip(text: str, pos: int, chars: str) -> int:
    while pos < len(text) and text[pos] in chars:
        pos += 1
    return pos


def _only(text: str, allowed: str) -> bool:
    return all(c in allowed for c in text)


def compare_version(v1: str, cmp: Cmp, v2: str) -> int:
    """dsl.c ``dsl_compare_version``: 1 true, 0 false, -1 invalid."""
    digits = "0123456789."
    if not _only(v1, digits) or not _only(v2, digits):
        return INVALID
    p1 = p2 = 0
    while p1 < len(v1) and p2 < len(v2):
        n1, e1 = _strtoumax(v1, p1)
        if n1 == _UINTMAX_MAX or e1 == p1:
            return INVALID
        n2, e2 = _strtoumax(v2, p2)
        if n2 == _UINTMAX_MAX or e2 == p2:
            return INVALID
        if n1 != n2:
            if cmp is Cmp.EQUAL:
                return 0
            if cmp is Cmp.NOT_EQUAL:
                return 1
            if cmp in (Cmp.LESS, Cmp.LESS_EQUAL):
                return int(n1 < n2)
            return int(n1 > n2)
        p1 = _skip(v1, e1, ".")
        p2 = _skip(v2, e2, ".")
    rest1 = p1 < len(v1) and _skip(v1, p1, ".0") < len(v1)
    rest2 = p2 < len(v2) and _skip(v2, p2, ".0") < len(v2)
    if cmp is Cmp.NOT_EQUAL:
        return int(rest1 or rest2)
    if cmp in (Cmp.EQUAL, Cmp.LESS_EQUAL, Cmp.GREATER_EQUAL):
        if not rest1 and not rest2:
            return 1
        if cmp is Cmp.EQUAL:
            return 0
    if cmp in (Cmp.LESS, Cmp.LESS_EQUAL):
        return int(not rest1 and rest2)
    return int(rest1 and not rest2)


def compare_string(s1: str, cmp: Cmp, s2: str) -> int:
    """dsl.c ``dsl_compare_string``: case-insensitive (``strcasecmp``) equality only."""
    if cmp is Cmp.EQUAL:
        return int(_ascii_lower(s1) == _ascii_lower(s2))
    if cmp is Cmp.NOT_EQUAL:
        return int(_ascii_lower(s1) != _ascii_lower(s2))
    return INVALID


@dataclass(frozen=True, slots=True)
class Device:
    """What the runtime reads about the host and one visible GPU; None where gpuguard does not know.

    ``cuda`` is the driver's CUDA version (``"12.2"``), ``driver`` the full driver version
    (``"535.129.03"``), ``arch`` the compute capability (``"8.0"``), ``brand`` the mapped brand
    name (``"Tesla"``, ``"Unknown"``, …).
    """

    cuda: str | None = None
    driver: str | None = None
    arch: str | None = None
    brand: str | None = None

    def value(self, prop: str) -> str | None:
        found: str | None = getattr(self, prop)
        return found


class Outcome(enum.Enum):
    SATISFIED = "satisfied"
    UNSATISFIED = "unsatisfied"
    INVALID = "invalid expression"


@dataclass(frozen=True, slots=True)
class Atom:
    """One parsed constraint such as ``driver>=535`` (``prop`` keeps the text as written)."""

    prop: str
    cmp: Cmp
    value: str


def parse_atom(expr: str) -> Atom | None:
    """dsl.c ``evaluate_rule``'s parsing; None where it returns -1 before evaluating."""
    n = next((i for i, c in enumerate(expr) if c in _OPERATOR_CHARS), len(expr))
    if n == 0:
        return None
    end = n
    while end < len(expr) and expr[end] in _OPERATOR_CHARS:
        end += 1
    if end == n:
        return None
    written = expr[n:end]
    op = next((o for o in _OPERATORS if o.value.startswith(written)), None)
    value = expr[end:]
    if op is None or not value:
        return None
    if _ascii_lower(expr[:n]) not in PROPERTIES:
        return None
    return Atom(expr[:n], op, value)


def _atom_results(atom: Atom | None, device: Device) -> frozenset[int]:
    """The values ``evaluate_rule`` can return for this atom on ``device`` (1, 0 or -1)."""
    if atom is None:
        return frozenset({INVALID})
    prop = _ascii_lower(atom.prop)
    actual = device.value(prop)
    if actual is None:
        if prop == "brand":
            possible = {INVALID} if atom.cmp not in (Cmp.EQUAL, Cmp.NOT_EQUAL) else {0, 1}
        elif not _only(atom.value, "0123456789."):
            possible = {INVALID}
        else:
            # The comparison stops at the first differing component, so a malformed component of
            # the written value is reached only for some node values.
            possible = {0, 1}
            if any(_strtoumax(p, 0)[0] == _UINTMAX_MAX for p in atom.value.split(".") if p) or (
                atom.value.startswith(".")
            ):
                possible.add(INVALID)
    else:
        compare = compare_string if prop == "brand" else compare_version
        possible = {compare(actual, atom.cmp, atom.value)}
    if 0 in possible and len(f"{atom.prop} {atom.cmp.value} {atom.value}".encode()) >= EXPR_MAX:
        # An unsatisfied expression too long for the error buffer makes evaluate_rule fail.
        possible = (possible - {0}) | {INVALID}
    return frozenset(possible)


@dataclass(frozen=True, slots=True)
class Evaluation:
    outcomes: frozenset[Outcome]
    condition: str  # what the runtime prints after "unsatisfied condition: "

    @property
    def definite(self) -> Outcome | None:
        return next(iter(self.outcomes)) if len(self.outcomes) == 1 else None


def evaluate(predicate: str, device: Device) -> Evaluation:
    """dsl.c ``dsl_evaluate`` over every possible value of what ``device`` leaves unknown.

    Space-separated terms are ORed, comma-separated constraints inside a term ANDed; empty pieces
    are skipped.  The C loop keeps ``ret`` across terms: a term whose constraints are all empty
    leaves the previous term's result, and the first satisfied term ends the evaluation.
    """
    terms = [[parse_atom(a) for a in term.split(",") if a] for term in predicate.split(" ") if term]
    outcomes: set[Outcome] = set()
    states = {1}  # possible values of ``ret`` entering the next term
    for atoms in terms:
        next_states: set[int] = set()
        for ret in states:
            alive, current = True, ret
            for atom in atoms:
                results = _atom_results(atom, device)
                if INVALID in results:
                    outcomes.add(Outcome.INVALID)
                if 0 in results:
                    next_states.add(0)
                if 1 not in results:
                    alive = False
                    break
                current = 1
            if alive:
                outcomes.add(Outcome.SATISFIED if current else Outcome.UNSATISFIED)
        states = next_states
        if not states:
            break
    for ret in states:
        outcomes.add(Outcome.SATISFIED if ret else Outcome.UNSATISFIED)
    first = predicate.split(" ", 1)[0]
    condition = first
    if first.startswith(_CUDA_REQUIRE_GREATER):
        condition += ", please update your driver to a newer version, or use an earlier cuda container"
    return Evaluation(frozenset(outcomes), condition)


# --- Which requirements a container has (nvidia-container-toolkit cuda_image.go) ---------------


class _Unknown:
    """An environment value gpuguard cannot know (``valueFrom``, ``$(VAR)`` references)."""

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()
EnvValue = str | _Unknown


def parse_bool(text: str) -> bool | None:
    """Go ``strconv.ParseBool``; None where it returns an error."""
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    return None


_LOOSE_SEMVER = patterns.compile(
    r"v?([0-9]+)(\.[0-9]+)?(\.[0-9]+)?(-([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?(\+([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?"
)
_PRERELEASE_ALLOWED = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-0123456789"
_U32 = 2**32 - 1
_U64 = 2**64 - 1


def _prerelease_ok(pre: str) -> bool:
    for part in pre.split("."):
        if not part:
            return False
        if _only(part, "0123456789"):
            if len(part) > 1 and part[0] == "0":
                return False
        elif not _only(part, _PRERELEASE_ALLOWED):
            return False
    return True


def parse_major_minor(version: str) -> str | None:
    """cuda_image.go ``parseMajorMinorVersion``: ``"12.2.2"`` → ``"12.2"``; None where it errors.

    ``semver.NewVersion`` coerces (``CoerceNewVersion = true``): the loose regular expression must
    match the whole string, segments fit in 64 bits, pre-release and metadata are validated; the
    toolkit then requires major and minor to fit in 32 bits.
    """
    if len(version) > 256:  # semver MaxVersionLen
        return None
    m = _LOOSE_SEMVER.fullmatch(version)
    if m is None:
        return None
    major = int(m.group(1))
    minor = int(m.group(2)[1:]) if m.group(2) else 0
    patch = int(m.group(3)[1:]) if m.group(3) else 0
    if max(major, minor, patch) > _U64:
        return None
    if m.group(5) and not _prerelease_ok(m.group(5)):
        return None
    if m.group(8) and not all(p and _only(p, _PRERELEASE_ALLOWED) for p in m.group(8).split(".")):
        return None
    if major > _U32 or minor > _U32:
        return None
    return f"{major}.{minor}"


@dataclass(frozen=True, slots=True)
class Environment:
    """A container's final environment as far as gpuguard knows it.

    ``values`` maps names to strings or UNKNOWN; ``complete`` says whether a name absent from
    ``values`` is known to be unset (False while the image's own Env is unknown).
    """

    values: Mapping[str, EnvValue]
    complete: bool

    def get(self, name: str) -> EnvValue | None:
        if name in self.values:
            return self.values[name]
        return None if self.complete else UNKNOWN


@dataclass(frozen=True, slots=True)
class Requirements:
    """``GetRequirements`` of a container: None in ``texts`` marks a requirement of unknown value."""

    disabled: bool | None  # None: cannot tell
    texts: tuple[str | None, ...]
    error: str | None = None  # GetRequirements fails (the hook panics; the container does not start)


def requirements(env: Environment) -> Requirements:
    """cuda_image.go ``GetRequirements`` (host config ``disable-require`` is assumed off)."""
    raw = env.get(DISABLE_REQUIRE)
    disabled: bool | None
    if raw is None:
        disabled = False
    elif isinstance(raw, _Unknown):
        disabled = None
    else:
        disabled = parse_bool(raw) is True  # `d, _ := strconv.ParseBool(disable)`
    texts: list[str | None] = [
        None if isinstance(value, _Unknown) else value
        for name, value in sorted(env.values.items())
        if name.startswith(REQUIRE_PREFIX) and not name.startswith(REQUIRE_JETPACK)
    ]
    if not env.complete:
        texts.append(None)  # the image may set further NVIDIA_REQUIRE_* variables
    cuda_version, require_cuda = env.get(CUDA_VERSION), env.get(REQUIRE_CUDA)
    # IsLegacy: len(CUDA_VERSION) > 0 && len(NVIDIA_REQUIRE_CUDA) == 0
    known_absent_cuda = cuda_version is None or cuda_version == ""
    known_required = isinstance(require_cuda, str) and require_cuda != ""
    if known_absent_cuda or known_required:
        return Requirements(disabled, tuple(texts))
    if isinstance(cuda_version, _Unknown) or isinstance(require_cuda, _Unknown):
        return Requirements(disabled, (*texts, None))
    assert isinstance(cuda_version, str)
    major_minor = parse_major_minor(cuda_version)
    if major_minor is None:
        return Requirements(disabled, tuple(texts), f"invalid CUDA version {cuda_version}")
    return Requirements(disabled, (*texts, f"cuda>={major_minor}"))


class Start(enum.Enum):
    STARTS = "starts"
    REFUSED = "refused"
    OFF = "off"  # NVIDIA_DISABLE_REQUIRE: nothing is checked
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Check:
    start: Start
    reason: str = ""  # for REFUSED: the runtime's own error text


def check(reqs: Requirements, device: Device) -> Check:
    """Whether the legacy runtime starts the container on a GPU with these properties."""
    if reqs.disabled is True:
        return Check(Start.OFF)
    refused: Check | None = None
    unknown = any(t is None for t in reqs.texts)
    if reqs.error is not None:
        refused = Check(Start.REFUSED, f"failed to get requirements: {reqs.error}")
    for text in reqs.texts:
        if text is None or refused is not None:
            continue
        result = evaluate(text, device)
        if Outcome.SATISFIED not in result.outcomes:
            reason = (
                "requirement error: invalid expression"
                if result.definite is Outcome.INVALID
                else f"requirement error: unsatisfied condition: {result.condition}"
            )
            refused = Check(Start.REFUSED, reason)
        elif result.definite is not Outcome.SATISFIED:
            unknown = True
    if refused is not None:
        return refused if reqs.disabled is False else Check(Start.UNKNOWN)
    if unknown:
        return Check(Start.UNKNOWN)
    return Check(Start.STARTS)


def cuda_floor(texts: Iterable[str | None]) -> tuple[int, ...] | None:
    """The highest ``cuda>=X.Y`` (or ``cuda>X.Y``) in the first term of any requirement.

    The first term is what the runtime reports when a requirement fails, and where nvidia/cuda
    images state their CUDA (``cuda>=12.8 brand=…,driver>=470,driver<471 …``; the later terms
    admit older driver branches for forward compatibility).  Used to tell whether the runtime's
    check covers an image's real need: NGC framework images say ``cuda>=9.0`` whatever CUDA they
    carry.
    """
    best: tuple[int, ...] | None = None
    for text in texts:
        if not text:
            continue
        first = text.split(" ", 1)[0]
        for atom in (parse_atom(a) for a in first.split(",") if a):
            if atom and _ascii_lower(atom.prop) == "cuda" and atom.cmp in (Cmp.GREATER_EQUAL, Cmp.GREATER):
                parts = atom.value.split(".")
                numbers = [small_int(p, 9) for p in parts]
                if all(n is not None for n in numbers):
                    floor = tuple(n for n in numbers if n is not None)
                    best = floor if best is None or floor > best else best
    return best
