"""Output formats of ``gpuguard lint``: each module exposes ``render(report, stream)``."""
