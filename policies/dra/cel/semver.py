"""Kubernetes' CEL ``Semver``: github.com/blang/semver/v4 parsing and ordering.

Ported from blang/semver v4 ``Parse`` and ``Version.Compare`` (v4/semver.go @ 4487282d,
the v4.0.0 that k8s.io/apiserver's go.mod pins) and from Kubernetes' ``normalizeAndParse``
(k8s.io/apiserver pkg/cel/library/semverlib.go): ``semver(s, true)`` strips one leading
"v", drops leading zeros and fills in a missing minor/patch.  Error texts are blang's.

The DRA scheduler parses ``version`` attributes with the same strict ``Parse``
(k8s.io/dynamic-resource-allocation cel/compile.go ``getAttributeValue``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from policies import patterns
from policies.dra.cel.values import CelEvalError

_NUMBERS = frozenset("0123456789")
_ALPHANUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-0123456789")
_UINT64_MAX = 2**64 - 1


class SemverError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class PreRelease:
    text: str
    number: int | None  # set for numeric identifiers

    def compare(self, other: PreRelease) -> int:
        if self.number is not None and other.number is None:
            return -1
        if self.number is None and other.number is not None:
            return 1
        if self.number is not None and other.number is not None:
            return (self.number > other.number) - (self.number < other.number)
        return (self.text > other.text) - (self.text < other.text)

    def __str__(self) -> str:
        return str(self.number) if self.number is not None else self.text


@dataclass(frozen=True, slots=True, eq=False)
class Semver:
    major: int
    minor: int
    patch: int
    pre: tuple[PreRelease, ...] = ()
    build: tuple[str, ...] = ()

    CEL_TYPE = "kubernetes.Semver"
    GO_TYPE = "cel.Semver"

    def compare(self, other: Semver) -> int:
        for a, b in ((self.major, other.major), (self.minor, other.minor), (self.patch, other.patch)):
            if a != b:
                return 1 if a > b else -1
        if not self.pre and not other.pre:
            return 0
        if not self.pre:
            return 1
        if not other.pre:
            return -1
        for a_pre, b_pre in zip(self.pre, other.pre, strict=False):
            c = a_pre.compare(b_pre)
            if c:
                return c
        return (len(self.pre) > len(other.pre)) - (len(self.pre) < len(other.pre))

    def __eq__(self, other: object) -> bool:  # blang EQ: build metadata has no precedence
        return isinstance(other, Semver) and self.compare(other) == 0

    def __hash__(self) -> int:
        return hash((self.major, self.minor, self.patch, self.pre))

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            text += "-" + ".".join(str(p) for p in self.pre)
        if self.build:
            text += "+" + ".".join(self.build)
        return text


def _only(text: str, allowed: frozenset[str]) -> bool:
    return all(c in allowed for c in text)


def _uint(text: str, what: str) -> int:
    if not text:
        raise SemverError(f'strconv.ParseUint: parsing "{text}": invalid syntax')
    value = int(text)
    if value > _UINT64_MAX:
        raise SemverError(f'strconv.ParseUint: parsing "{text}": value out of range')
    return value


def _number(part: str, what: str) -> int:
    if not _only(part, _NUMBERS):
        raise SemverError(f'Invalid character(s) found in {what} number "{part}"')
    if len(part) > 1 and part[0] == "0":
        raise SemverError(f'{what.capitalize()} number must not contain leading zeroes "{part}"')
    return _uint(part, what)


_PLAIN = patterns.compile(r"(0|[1-9][0-9]{0,18})\.(0|[1-9][0-9]{0,18})\.(0|[1-9][0-9]{0,18})")


@functools.lru_cache(maxsize=4096)
def parse(text: str) -> Semver:
    """blang/semver v4 ``Parse`` (strict); cached, as slices repeat the same few versions."""
    plain = _PLAIN.fullmatch(text)
    if plain is not None and all(int(g) <= _UINT64_MAX for g in plain.groups()):
        return Semver(int(plain.group(1)), int(plain.group(2)), int(plain.group(3)))
    if not text:
        raise SemverError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise SemverError("No Major.Minor.Patch elements found")
    major = _number(parts[0], "major")
    minor = _number(parts[1], "minor")
    patch_text = parts[2]
    build: list[str] = []
    pre_texts: list[str] = []
    if "+" in patch_text:
        patch_text, build_text = patch_text.split("+", 1)
        build = build_text.split(".")
    if "-" in patch_text:
        patch_text, pre_text = patch_text.split("-", 1)
        pre_texts = pre_text.split(".")
    patch = _number(patch_text, "patch")
    pre: list[PreRelease] = []
    for item in pre_texts:
        if not item:
            raise SemverError("Prerelease is empty")
        if _only(item, _NUMBERS):
            if len(item) > 1 and item[0] == "0":
                raise SemverError(f'Numeric PreRelease version must not contain leading zeroes "{item}"')
            pre.append(PreRelease(item, _uint(item, "prerelease")))
        elif _only(item, _ALPHANUM):
            pre.append(PreRelease(item, None))
        else:
            raise SemverError(f'Invalid character(s) found in prerelease "{item}"')
    for item in build:
        if not item:
            raise SemverError("Build meta data is empty")
        if not _only(item, _ALPHANUM):
            raise SemverError(f'Invalid character(s) found in build meta data "{item}"')
    return Semver(major, minor, patch, tuple(pre), tuple(build))


def parse_normalized(text: str) -> Semver:
    """semverlib.go ``normalizeAndParse``: ``semver(s, true)``."""
    if text.startswith("v"):
        text = text[1:]
    parts = text.split(".", 2)
    for i, p in enumerate(parts):
        if len(p) > 1:
            p = p.lstrip("0")
            if not p or p[0] not in _NUMBERS:
                p = "0" + p
            parts[i] = p
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise SemverError("short version cannot contain PreRelease/Build meta data")
        parts.extend(["0"] * (3 - len(parts)))
    return parse(".".join(parts))


def semver_value(text: str, normalize: bool = False) -> Semver:
    """``semver()`` in CEL: a parse failure is a CEL error with blang's message."""
    try:
        return parse_normalized(text) if normalize else parse(text)
    except SemverError as exc:
        raise CelEvalError(str(exc)) from None


def is_semver(text: str, normalize: bool = False) -> bool:
    try:
        parse_normalized(text) if normalize else parse(text)
    except SemverError:
        return False
    return True
