"""Render an HTML file in headless Debian Chromium and look at the screenshot, so tests can check that
a report actually draws something.

``render(html_file, png)`` runs the real browser on a ``file://`` URL with networking off, a
throwaway profile and a fixed window; ``dom(html_file, profile)`` is the document Chromium parsed;
``ink(png)`` says what share of the pixels differ from the page background, so a blank (or
unstyled, or failed) page is caught; ``measure(png, colours)`` also says whether named colours
(badges, tiles) were drawn.  Chromium comes from ``apt-get install chromium``
(`.ci/run` installs it): without it the test is skipped locally and fails under CI.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from tests.support.tools import tool

WINDOW = (1280, 2000)
TIMEOUT = 120
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions")


def render(page: Path, png: Path, window: tuple[int, int] = WINDOW, profile: Path | None = None) -> Path:
    chromium = tool("chromium", "apt-get install --no-install-recommends chromium")
    profile = profile or png.parent / f"{png.stem}-profile"
    done = subprocess.run(
        [str(chromium), *FLAGS, f"--user-data-dir={profile}", f"--screenshot={png}",
         f"--window-size={window[0]},{window[1]}", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=TIMEOUT, check=False,
    )
    assert done.returncode == 0 and png.is_file(), f"chromium failed ({done.returncode}):\n{done.stderr[-2000:]}"
    return png


def dom(page: Path, profile: Path) -> str:
    """The document as Chromium built it (``--dump-dom``): what a reader's browser parsed out of the
    file, not the bytes gpuguard wrote."""
    chromium = tool("chromium", "apt-get install --no-install-recommends chromium")
    done = subprocess.run(
        [str(chromium), *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=TIMEOUT, check=False,
    )
    assert done.returncode == 0 and done.stdout.strip(), f"chromium failed ({done.returncode}):\n{done.stderr[-2000:]}"
    return done.stdout


def screenshot(html: Path, out: Path, profile: Path) -> Path:
    return render(html, out, WINDOW, profile)


@dataclass(frozen=True)
class Ink:
    share: float  # pixels that are not the background colour
    colours: int  # distinct colours among them (text, badges, borders)
    size: tuple[int, int]


def ink(png: Path) -> Ink:
    with Image.open(png) as image:
        rgb = image.convert("RGB")
        size = rgb.size
        counts = rgb.getcolors(maxcolors=size[0] * size[1]) or []
    background = max(counts)[1]  # the commonest colour
    inked = [(n, colour) for n, colour in counts if colour != background]
    return Ink(sum(n for n, _ in inked) / (size[0] * size[1]), len(inked), size)


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
    share = 1 - most / (size[0] * size[1])

    def near(target: tuple[int, ...]) -> bool:
        return any(sum(abs(a - b) for a, b in zip(c, target, strict=True)) <= 24 for c in counts)

    return Drawn(size, share, len(counts), {name: near(c) for name, c in colours.items()})
