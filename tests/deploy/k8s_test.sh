#!/usr/bin/env bash
# deploy/kubernetes, offline: every object validated against the Kubernetes API schemas
# (npm kubernetes-models, pinned in tests/deploy/k8s/package-lock.json; the ServiceMonitor
# against the Prometheus Operator CRD), and the objects checked against each other
# (tests/deploy/k8s/check_manifests.mjs). Then the checker must catch a broken copy.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
K8S=tests/deploy/k8s
# The test installs and fetches nothing: scripts/install-deps.sh installs Node.js and the
# pinned npm modules (tests/deploy/k8s/node_modules, git-ignored).
if ! command -v node >/dev/null; then
  echo "SKIPPED: node not found (scripts/install-deps.sh installs nodejs and the npm modules)"; exit 77
fi
if ! cmp -s $K8S/package-lock.json $K8S/node_modules/.spexd-installed-lock; then
  echo "SKIPPED: the npm modules of $K8S/package-lock.json are not installed (scripts/install-deps.sh runs npm ci there)"
  exit 77
fi
node $K8S/check_manifests.mjs deploy/kubernetes

echo "negative check: a Service selector that matches no pod and a string port must fail"
bad=$(mktemp -d)
trap 'rm -rf "$bad"' EXIT
cp deploy/kubernetes/*.yaml "$bad/"
sed -i 's/app.kubernetes.io\/component: server/app.kubernetes.io\/component: other/' "$bad/service.yaml"
sed -i 's/containerPort: 9464/containerPort: "9464"/' "$bad/deployment.yaml"
if out=$(node $K8S/check_manifests.mjs "$bad"); then
  echo "FAIL: the checker accepted broken manifests"; exit 1
fi
grep -c FAIL <<<"$out" | xargs echo "  caught failures:"
grep -q "containerPort must be integer" <<<"$out" || { echo "FAIL: schema error not caught"; exit 1; }
grep -q "FAIL  Service selector matches the pod labels" <<<"$out" || { echo "FAIL: selector not caught"; exit 1; }
echo "k8s_test: PASS"
