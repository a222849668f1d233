"""Render an HTML file in headless Debian Chromium and look at the screenshot.

``render(html_file, png)`` runs the real browser on a ``file://`` URL with networking off, a
throwaway profile and a fixed window; ``ink(png)`` decodes the PNG with Pillow and says what share of
its pixels differ from the page background, so a blank (or unstyled, or failed) page is caught.
Chromium comes from ``apt-get install chromium`` (`.ci/run` installs it): without it the test is
skipped locally and fails under CI.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.support.tools import tool

WINDOW = (1280, 2000)
TIMEOUT = 120


@dataclass(frozen=True)
class Ink:
    share: float  # pixels that are not the background colour
    colours: int  # distinct colours among them (text, badges, borders)
    size: tuple[int, int]


def render(page: Path, png: Path, window: tuple[int, int] = WINDOW) -> None:
    chromium = tool("chromium", "apt-get install chromium")
    profile = png.parent / f"{png.stem}-profile"
    done = subprocess.run(
        [str(chromium), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
         f"--user-data-dir={profile}", f"--screenshot={png}", f"--window-size={window[0]},{window[1]}",
         page.resolve().as_uri()],
        capture_output=True, text=True, timeout=TIMEOUT, check=False,
    )
    assert done.returncode == 0 and png.is_file(), f"chromium failed ({done.returncode}):\n{done.stderr[-2000:]}"


def ink(png: Path) -> Ink:
    from PIL import Image

    with Image.open(png) as image:
        rgb = image.convert("RGB")
        size = rgb.size
        counts = rgb.getcolors(maxcolors=size[0] * size[1]) or []
    background = max(counts)[1]  # the commonest colour
    inked = [(n, colour) for n, colour in counts if colour != background]
    return Ink(sum(n for n, _ in inked) / (size[0] * size[1]), len(inked), size)
