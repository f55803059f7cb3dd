#!/usr/bin/env bash
# deploy/kubernetes, offline: every object validated against its Kubernetes API schema
# (tests/deploy/k8s/schemas.json, made from Kubernetes' OpenAPI document and the
# Prometheus Operator's ServiceMonitor CRD by tests/deploy/k8s/make_schemas.py) with
# Debian's python3-jsonschema, and the objects checked against each other
# (tests/deploy/k8s/check_manifests.py). Then the checker must catch broken copies.
set -euo pipefail
cd "$(dirname "$0")/../.."
K8S=tests/deploy/k8s
PYTHON=/usr/bin/python3
# The test installs and fetches nothing: scripts/install-deps.sh installs the two modules.
if ! "$PYTHON" -c "import jsonschema, yaml" 2>/dev/null; then
  echo "SKIPPED: $PYTHON lacks jsonschema or yaml (scripts/install-deps.sh installs python3-jsonschema and python3-yaml)"
  exit 77
fi
"$PYTHON" $K8S/check_manifests.py deploy/kubernetes

bad=$(mktemp -d)
trap 'rm -rf "$bad"' EXIT
# Each broken copy must fail, with the schema's or the cross-check's words for it.
expect_fail() {  # what, sed expression, file, expected line
  rm -f "$bad"/*.yaml
  cp deploy/kubernetes/*.yaml "$bad/"
  sed -i "$2" "$bad/$3"
  cmp -s "$bad/$3" "deploy/kubernetes/$3" && { echo "FAIL: the edit for '$1' changed nothing"; exit 1; }
  local out
  if out=$("$PYTHON" $K8S/check_manifests.py "$bad"); then
    echo "FAIL: the checker accepted $1"; exit 1
  fi
  grep -qF -- "$4" <<<"$out" || { printf '%s\n' "$out"; echo "FAIL: $1 not reported as: $4"; exit 1; }
  echo "  caught: $1"
}
echo "negative checks:"
expect_fail "a string port" 's/containerPort: 9464/containerPort: "9464"/' deployment.yaml \
  "'9464' is not of type 'integer'"
expect_fail "a misspelt field" 's/^\(  *\)replicas:/\1replica:/' deployment.yaml \
  "Additional properties are not allowed ('replica' was unexpected)"
expect_fail "a container without its name" 's/^\(  *\)- name: spexd$/\1- nam: spexd/' deployment.yaml \
  "'name' is a required property"
expect_fail "a Service selector that matches no pod" \
  's/app.kubernetes.io\/component: server/app.kubernetes.io\/component: other/' service.yaml \
  "FAIL  Service selector matches the pod labels"
expect_fail "an unknown ServiceMonitor field" 's/^\(  *\)jobLabel:/\1jobLabels:/' servicemonitor.yaml \
  "('jobLabels' was unexpected)"
echo "k8s_test: PASS"
