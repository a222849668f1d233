"""Output formats of ``gpuguard lint``: each module exposes ``render(report, stream)``."""

from __future__ import annotations

FORMATS = ("text", "json", "sarif", "github")
