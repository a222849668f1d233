"""``gpuguard why-pending``: why GPU pods wait in Pending while GPUs sit idle.

A face over :mod:`policies.pending` (the pure analysis): it gathers the cluster's objects (live or
from dumps), picks the pods, adds the engine's own findings and, with Prometheus, measured GPU
utilization, and renders the reasons as text, JSON or one self-contained HTML file.
"""
