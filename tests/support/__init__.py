"""Helpers shared by the test modules (paths, in-process CLI runs, fake servers)."""
