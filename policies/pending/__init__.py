"""Why GPU pods are Pending: the pure model behind ``gpuguard why-pending`` (no I/O).

* :mod:`policies.pending.objects`    – Node, Pod and PriorityClass objects as light records;
* :mod:`policies.pending.allocation` – GPUs allocatable, allocated, reserved and free per node and pool;
* :mod:`policies.pending.health`     – device-plugin health, cordoned and NotReady GPU nodes;
* :mod:`policies.pending.fit`        – where a pending pod could go: insufficient, fragmented, stranded;
* :mod:`policies.pending.preemption` – lower-priority pods whose eviction would make room;
* :mod:`policies.pending.schedmsg`   – the scheduler's ``0/N nodes are available: …`` message, parsed;
* :mod:`policies.pending.events`     – which message to read for a pod (condition first, events as fallback).

Facts and their sources are in ../shared/reference/pending-gpus.md; each module cites what it uses.
"""
