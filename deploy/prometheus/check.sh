#!/usr/bin/env bash
# The alert rules checked the way Prometheus will load them, with Debian's promtool (unpacked into
# .stack/opt/prometheus by `stack.sh install prometheus` on first use; nothing is started):
#   promtool check rules  rules.yml        syntax, PromQL, templates
#   promtool test rules   rules.test.yml   each alert fires on its trouble and not on a healthy neighbour
#
#   bash deploy/prometheus/check.sh        (tests/run.sh's `rules` tier, run with the manifests)
set -euo pipefail
DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$DIR/../.." && pwd)"
bash "$REPO_ROOT/deploy/local/stack.sh" install prometheus >/dev/null
PROMTOOL="$REPO_ROOT/.stack/opt/prometheus/usr/bin/promtool"
cd "$DIR"
"$PROMTOOL" check rules rules.yml
"$PROMTOOL" test rules rules.test.yml
