"""Neutral loading shared by every face: safe YAML, input files, config files, cluster snapshots."""
