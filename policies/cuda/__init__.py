"""CUDA knowledge for gpuguard: which CUDA an image needs and whether a node's driver runs it.

``knowledge`` loads the versioned tables in ``policies/data/`` (each row cites its source),
``image``/``resolve`` turn an image reference (plus annotations and configured rules) into a
CUDA version, ``compat`` classifies a node's driver against it, and ``affinity`` writes the node
affinity that keeps a pod on drivers that run its image.
"""
