"""Check that the generic top-level import packages gpuguard installs are really gpuguard's.

gpuguard keeps the top-level packages it was specified with (``policies``, ``linter``, ``audit``,
``webhook``, ``certs``) instead of one ``gpuguard.*`` namespace: a setuptools ``package-dir``
mapping would make editable installs resolve imports through an import hook, which static type
checkers cannot follow (mypy#13392; mesonbuild/meson-python discussion #821: editable installs
"need an import hook which executes code", type checkers "do not want to execute any code").
So gpuguard installs as an application — with pipx, in its own virtual environment, or as the
container image — and refuses to run when another distribution's package of the same name
(PyPI has ``policies`` and ``certs``) shadows one of its own.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

OWN_PACKAGES = ("gpuguard", "policies", "linter", "webhook", "certs", "audit", "whypending")


def foreign_packages() -> list[str]:
    """``name (path)`` of each package that does not sit beside ``gpuguard`` (empty when all do)."""
    home = Path(__file__).resolve().parent.parent
    foreign = []
    for name in OWN_PACKAGES[1:]:
        spec = importlib.util.find_spec(name)
        location = Path(spec.origin).resolve().parent if spec is not None and spec.origin else None
        if location is None or location.parent != home:
            foreign.append(f"{name} ({location or 'not found'})")
    return foreign


def problem() -> str | None:
    foreign = foreign_packages()
    if not foreign:
        return None
    return (
        f"another distribution's package shadows gpuguard's: {', '.join(foreign)}; install gpuguard "
        "as an application (pipx install, or its own virtual environment) so that its packages "
        f"{', '.join(OWN_PACKAGES)} are not shared"
    )
