"""Output formats of ``gpuguard audit``: each module exposes ``render(result, stream)``."""
