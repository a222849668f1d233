"""Render an HTML file in headless Debian Chromium and measure the screenshot, so tests can check
that a report actually draws something."""

from __future__ import annotations

import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from tests.support.tools import tool

SIZE = (1280, 2000)
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run")


def screenshot(html: Path, out: Path, profile: Path) -> Path:
    chromium = tool("chromium", "apt-get install --no-install-recommends chromium")
    done = subprocess.run(
        [str(chromium), *FLAGS, f"--user-data-dir={profile}", f"--screenshot={out}",
         f"--window-size={SIZE[0]},{SIZE[1]}", html.resolve().as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0 and out.is_file(), f"chromium failed: {done.stderr[-2000:]}"
    return out


@dataclass(frozen=True)
class Drawn:
    size: tuple[int, int]
    ink: float  # share of pixels that differ from the most common colour (the background)
    colours: int  # distinct colours
    has: dict[str, bool]  # whether some pixel is close to each named colour


def measure(png: Path, colours: dict[str, tuple[int, int, int]]) -> Drawn:
    with Image.open(png) as img:
        rgb = img.convert("RGB")
        size = rgb.size
        found = rgb.getcolors(maxcolors=size[0] * size[1]) or []
    counts: Counter[tuple[int, ...]] = Counter({tuple(colour): n for n, colour in found
                                                if isinstance(colour, tuple)})
    most = counts.most_common(1)[0][1]
    ink = 1 - most / (size[0] * size[1])

    def near(target: tuple[int, ...]) -> bool:
        return any(sum(abs(a - b) for a, b in zip(c, target, strict=True)) <= 24 for c in counts)

    return Drawn(size, ink, len(counts), {name: near(c) for name, c in colours.items()})
