#!/usr/bin/env bash
# deploy/prometheus: the rule file is valid (promtool check rules) and its unit tests pass
# (promtool test rules: each alert fires on the series that should raise it, after its
# `for`, and not on a healthy neighbour; recording rules give the expected values).
set -euo pipefail
cd "$(dirname "$0")/../../deploy/prometheus"
command -v promtool >/dev/null ||
  { echo "SKIPPED: promtool not found (scripts/install-deps.sh installs it)"; exit 77; }
promtool check rules spexd-rules.yaml spexd-health-rules.yaml
promtool test rules spexd-rules.test.yaml spexd-health-rules.test.yaml \
  spexd-health-rules-week.test.yaml
