"""gpuguard lint: the offline face of the engine (YAML files in, findings with line:column out)."""
