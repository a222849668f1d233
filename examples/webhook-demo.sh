#!/usr/bin/env bash
# Run `gpuguard serve` locally over TLS and show a denial, a warning and a patch.
# Run examples/demo.sh first (it creates .venv). Needs curl.
set -euo pipefail
cd "$(dirname "$0")/.."
GG=.venv/bin/gpuguard
WORK=$(mktemp -d)
PORT=${PORT:-8443}
trap 'kill "$SERVER" 2>/dev/null || true; rm -rf "$WORK"' EXIT

$GG certs --service gpuguard --namespace gpuguard --out-dir "$WORK/certs" --san localhost --san 127.0.0.1 >/dev/null
cat > "$WORK/gpuguard.yaml" <<'YAML'
mutate: [gpu-limit-missing]
YAML
$GG serve --tls-cert "$WORK/certs/tls.crt" --tls-key "$WORK/certs/tls.key" --config "$WORK/gpuguard.yaml" \
    --cluster examples/cluster.yaml --host 127.0.0.1 --port "$PORT" 2>"$WORK/server.log" &
SERVER=$!
CURL=(curl -sS --cacert "$WORK/certs/ca.crt" --retry 50 --retry-connrefused --retry-delay 0 --max-time 5)
"${CURL[@]}" "https://localhost:$PORT/readyz" >/dev/null 2>&1

cat > "$WORK/review.json" <<'JSON'
{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
 "request": {"uid": "3f1c2d9e-0000-4000-8000-000000000001",
  "kind": {"group": "", "version": "v1", "kind": "Pod"},
  "resource": {"group": "", "version": "v1", "resource": "pods"},
  "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
  "requestResource": {"group": "", "version": "v1", "resource": "pods"},
  "name": "train", "namespace": "ml", "operation": "CREATE",
  "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
  "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train", "namespace": "ml"},
   "spec": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "containers": [{"name": "train", "image": "nvidia/cuda:12.4.1-runtime-ubuntu22.04",
     "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}},
  "oldObject": null, "dryRun": false,
  "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}}}
JSON
show() { .venv/bin/python -c 'import base64, json, sys
r = json.load(sys.stdin)["response"]
print(json.dumps({k: v for k, v in r.items() if k != "patch"}, indent=2))
if "patch" in r: print("patch:", base64.b64decode(r["patch"]).decode())'; }
echo "== POST /validate (a GPU requested without a limit: denied; warnings attached)"
"${CURL[@]}" -H 'Content-Type: application/json' --data-binary @"$WORK/review.json" \
    "https://localhost:$PORT/validate?timeout=10s" | show
echo "== POST /mutate (allowed, with a JSON Patch that adds the limit)"
"${CURL[@]}" -H 'Content-Type: application/json' --data-binary @"$WORK/review.json" \
    "https://localhost:$PORT/mutate?timeout=10s" | show
