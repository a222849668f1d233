"""The audit of objects that already exist, shared by ``gpuguard audit`` and ``gpuguard serve --audit-interval``.

* :mod:`gpuguard.audit.model`        – audited objects, findings with their change, the result;
* :mod:`gpuguard.audit.ownership`    – pods and other children reported through their audited owners;
* :mod:`gpuguard.audit.changes`      – introduced / resolved / unchanged between two fact sets;
* :mod:`gpuguard.audit.auditor`      – evaluate objects one at a time against one or two fact sets;
* :mod:`gpuguard.audit.dumps`        – objects from ``kubectl get … -o yaml|json`` dumps;
* :mod:`gpuguard.audit.live`         – objects and facts from a live cluster (discovery, paginated lists);
* :mod:`gpuguard.audit.pools`        – the per-pool GPU summary (allocatable, allocated, free, idle);
* :mod:`gpuguard.audit.policyreport` – PolicyReports (wgpolicyk8s.io) and OpenReports Reports;
* :mod:`gpuguard.audit.publish`      – create or update those reports through the API.

Faces render an :class:`~gpuguard.audit.model.AuditResult`; nothing here knows a face.
"""
