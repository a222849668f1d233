#!/usr/bin/env bash
# Set up gpuguard in .venv and lint the bundled example manifests against the example cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e .
set +e
.venv/bin/gpuguard lint examples/manifests --cluster examples/cluster.yaml "$@"
status=$?
set -e
echo "gpuguard lint exited with $status (1 = findings at or above --fail-on, as expected for these examples)"
[ "$status" -le 1 ]
