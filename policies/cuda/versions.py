"""Dotted version numbers as integer tuples: ``570.26 < 570.124.06`` compares component-wise."""

from __future__ import annotations

from policies.shapes import small_int

Version = tuple[int, ...]
MAX_PARTS = 8  # no version has more components; longer text is no version


def parse_version(text: object) -> Version | None:
    """``"12.4.1"`` → ``(12, 4, 1)``; None for anything that is not dot-separated integers."""
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        return None
    parts = str(text).strip().split(".", MAX_PARTS)
    numbers = [small_int(p, 9) for p in parts]
    if len(parts) > MAX_PARTS or not all(n is not None for n in numbers):
        return None
    return tuple(n for n in numbers if n is not None)


def format_version(version: Version) -> str:
    return ".".join(str(p) for p in version)


def format_driver(version: Version) -> str:
    """Driver revisions are zero-padded to two digits, as NVIDIA prints them (535.129.03)."""
    if len(version) >= 3:
        return f"{version[0]}.{version[1]}.{version[2]:02d}" + "".join(f".{p}" for p in version[3:])
    return format_version(version)


def major_minor(version: Version) -> tuple[int, int]:
    return (version[0], version[1] if len(version) > 1 else 0)
