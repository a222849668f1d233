"""``gpuguard audit``: judge what already runs (dumps or a live cluster), and what a planned change breaks."""
