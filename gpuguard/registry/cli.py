"""Registry lookups for command-line faces: flags, settings, and a synchronous prefetch.

``--registry`` (or ``registry.enabled: true`` in the config) turns lookups on, ``--offline``
forbids them whatever the config says; ``--registry-ca`` and ``--insecure-registry`` add to the
config's ``registry.ca`` and ``registry.insecure``.  Results are cached on disk (see cache.py).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpuguard.registry.auth import CredentialStore
from gpuguard.registry.cache import DiskStore, cache_dir
from gpuguard.registry.facts import Pair, ResolvedImages
from policies.images import ImageLookup
from policies.registry_config import RegistryConfigError, RegistrySettings, normalise_insecure

if TYPE_CHECKING:
    from gpuguard.registry.resolver import Resolver

MAX_PARALLEL = 8


class RegistryUsageError(ValueError):
    """A bad registry flag or setting (a usage error: exit 2)."""


def add_arguments(parser: argparse.ArgumentParser, default_on: bool) -> None:
    group = parser.add_argument_group("registry lookups")
    switch = group.add_mutually_exclusive_group()
    if not default_on:
        switch.add_argument(
            "--registry",
            action="store_true",
            help="read image configs (CUDA_VERSION, NVIDIA_REQUIRE_CUDA) from their registries",
        )
    switch.add_argument("--offline", action="store_true", help="never contact a registry (overrides the config)")
    group.add_argument("--registry-ca", metavar="FILE", help="also trust this CA (PEM) for registries")
    group.add_argument(
        "--insecure-registry",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="reach this registry over plain HTTP (repeatable; exactly as written in image names)",
    )


def effective_settings(configured: RegistrySettings, args: argparse.Namespace) -> RegistrySettings | None:
    """The settings to use, or None when lookups are off."""
    if getattr(args, "offline", False):
        return None
    enabled = configured.enabled or bool(getattr(args, "registry", False))
    if not enabled:
        return None
    insecure = list(configured.insecure)
    for entry in getattr(args, "insecure_registry", None) or []:
        try:
            insecure.append(normalise_insecure(entry, "--insecure-registry"))
        except RegistryConfigError as exc:
            raise RegistryUsageError(str(exc)) from None
    ca = getattr(args, "registry_ca", None) or configured.ca
    return dataclasses.replace(configured, enabled=True, ca=ca, insecure=tuple(dict.fromkeys(insecure)))


def open_resolver(settings: RegistrySettings) -> tuple[Resolver, DiskStore]:
    # The HTTP client (httpx, ~85 ms to import) is loaded only by runs that look images up.
    from gpuguard.registry.client import ClientOptions, RegistryClient, RegistryError
    from gpuguard.registry.resolver import Resolver

    try:
        client = RegistryClient(ClientOptions.from_settings(settings), CredentialStore.load())
    except RegistryError as exc:
        raise RegistryUsageError(str(exc)) from None
    store = DiskStore(cache_dir(), settings.tag_ttl, settings.negative_ttl)
    return Resolver(client, store, settings.timeout), store


def prefetch(settings: RegistrySettings, pairs: Sequence[Pair]) -> tuple[ResolvedImages, str]:
    """Look every (image, arch) up, at most MAX_PARALLEL at a time: the view, and a cache problem."""
    import asyncio  # only runs that look images up pay for it (about 30 ms of every CLI start-up)

    resolver, store = open_resolver(settings)

    async def run() -> list[ImageLookup]:
        gate = asyncio.Semaphore(MAX_PARALLEL)

        async def one(image: str, arch: str) -> ImageLookup:
            async with gate:
                return await resolver.lookup(image, arch)

        try:
            return list(await asyncio.gather(*(one(image, arch) for image, arch in pairs)))
        finally:
            await resolver.client.aclose()

    results = asyncio.run(run()) if pairs else []
    return ResolvedImages(dict(zip(pairs, results, strict=True))), store.problem


def failure_notes(view: ResolvedImages) -> list[str]:
    return [
        f"image {image} (linux/{arch}): {lookup.detail}; judged by offline knowledge"
        for (image, arch), lookup in view.items()
        if lookup.status == "failed" and image.strip() not in view.quiet
    ]
