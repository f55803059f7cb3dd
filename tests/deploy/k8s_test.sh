#!/usr/bin/env bash
# deploy/kubernetes, offline: every object validated against the Kubernetes API schemas
# (npm kubernetes-models, pinned in tests/deploy/k8s/package-lock.json; the ServiceMonitor
# against the Prometheus Operator CRD), and the objects checked against each other
# (tests/deploy/k8s/check_manifests.mjs). Then the checker must catch a broken copy.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  if [[ $(id -u) -eq 0 ]]; then
    apt-get -o DPkg::Lock::Timeout=300 -q update >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q nodejs npm >/dev/null
  else
    echo "SKIPPED: node and npm are needed (apt-get install nodejs npm)"; exit 77
  fi
fi
K8S=tests/deploy/k8s
# npm ci into the source tree (git-ignored), once; npm's own cache serves later installs.
if ! cmp -s $K8S/package-lock.json $K8S/node_modules/.spexd-installed-lock; then
  (cd $K8S && npm ci --prefer-offline --no-audit --no-fund --loglevel=error &&
   cp package-lock.json node_modules/.spexd-installed-lock)
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
