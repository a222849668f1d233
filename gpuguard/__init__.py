"""The gpuguard application shell: the ``gpuguard`` command and the loading every face shares.

``gpuguard.cli`` dispatches subcommands to the faces (``linter``, ``webhook``, ``certs``);
``gpuguard.sources`` reads manifests, config files and cluster snapshots for all of them.
"""
