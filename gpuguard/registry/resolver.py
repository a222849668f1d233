"""``Resolver.lookup(image, arch)``: an image as written in a pod → ``ImageLookup``, via the cache.

Never raises: every problem becomes ``ImageLookup("failed", detail=...)``, remembered briefly.
"""

from __future__ import annotations

import asyncio
import logging

from gpuguard.registry.cache import Store
from gpuguard.registry.client import RegistryClient, RegistryError
from gpuguard.registry.reference import ReferenceError, parse
from policies.images import ImageConfig, ImageLookup

log = logging.getLogger("gpuguard.registry")


class Resolver:
    def __init__(self, client: RegistryClient, store: Store, timeout: float) -> None:
        self.client = client
        self.store = store
        self.timeout = timeout

    async def lookup(self, image: str, arch: str) -> ImageLookup:
        try:
            ref = parse(image)
        except ReferenceError as exc:
            return ImageLookup("failed", detail=f"not a valid image reference: {exc}")
        remembered = self.store.get_failure(image, arch)
        if remembered is not None:
            return ImageLookup("failed", detail=remembered)
        try:
            async with asyncio.timeout(self.timeout):
                config = await self._resolve(image, arch)
        except TimeoutError:
            detail = f"registry {ref.domain}: no answer within {self.timeout:g}s"
        except RegistryError as exc:
            detail = f"registry {ref.domain}: {exc}"
        except Exception as exc:  # a bug must not take a review or a lint run down with it
            log.exception("registry lookup of %s failed", image)
            detail = f"registry {ref.domain}: internal error: {type(exc).__name__}: {exc}"
        else:
            return ImageLookup("found", config=config)
        self.store.put_failure(image, arch, detail)
        return ImageLookup("failed", detail=detail)

    async def _resolve(self, image: str, arch: str) -> ImageConfig:
        ref = parse(image)
        key = str(ref)
        top_digest = ref.digest or self.store.get_tag(key)
        if top_digest:
            cached = self.store.get_config(top_digest, arch)
            if cached is not None:
                return cached
        top = await self.client.manifest(ref, top_digest or ref.reference)
        if not ref.digest:
            self.store.put_tag(key, top.digest)
        cached = self.store.get_config(top.digest, arch)
        if cached is not None:
            return cached
        config = await self.client.image_config(ref, top, arch)
        self.store.put_config(top.digest, arch, config)
        return config
