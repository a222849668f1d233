"""Cluster objects for the pending-pod analysis: from dumps (:mod:`gpuguard.kube.dump`) or a live
cluster (:mod:`gpuguard.kube.live`), both as :class:`policies.pending.state.ClusterObjects`."""
