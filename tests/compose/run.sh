#!/usr/bin/env bash
# The compose e2e tier (`npm run test:compose`): docker-compose.yml brought up for real, then the jest
# project `compose` (tests/compose/*.compose.ts) run against it through its 127.0.0.1 published ports.
#
#   1. engine: Docker with the compose plugin when a daemon answers; otherwise Podman (podman, runc and
#      debootstrap from Debian's packages, podman-compose from PyPI, installed here when missing);
#   2. images: Podman builds every image here from package registries (deploy/compose/images.sh, the
#      override deploy/compose/local-images.yml); Docker pulls the public ones and builds the app's;
#   3. up in stages under the project name $AGENTRUN_COMPOSE_PROJECT (default agentrun-e2e), readiness
#      by polling the published ports (Podman < 4.6 runs no healthchecks and podman-compose does not
#      wait for `service_healthy`), one-shot services waited for and their exit codes checked;
#   4. jest; 5. down, volumes and network removed (also on failure and on Ctrl-C). Images stay: they
#      are the cache of the next run.
#
# Settings: AGENTRUN_HOST_PORT_PREFIX (default 2: ports 29092, 27233, 25432, 28080..., so a native stack
# can stay up), AGENTRUN_COMPOSE_READY_TIMEOUT_S (default 300, per stage), AGENTRUN_COMPOSE_KEEP=1 (leave
# the stack up afterwards), AGENTRUN_COMPOSE_ENGINE=docker|podman (skip detection). Extra arguments go
# to jest. The last line is the `tests: N passed, N failed` count of the tier.
#
#   bash tests/compose/run.sh --bench [runs]   (npm run bench:compose) the same stack, but instead of
#       jest, tests/bench/compose.bench.ts: publish -> first SSE event on it beside the native stack
#       (started here when down; the bench starts the native apps itself).
set -uo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO_ROOT"
export AGENTRUN_COMPOSE_PROJECT="${AGENTRUN_COMPOSE_PROJECT:-agentrun-e2e}"
export AGENTRUN_HOST_PORT_PREFIX="${AGENTRUN_HOST_PORT_PREFIX-2}"
READY_TIMEOUT_S="${AGENTRUN_COMPOSE_READY_TIMEOUT_S:-300}"
PODMAN_COMPOSE_VERSION="${PODMAN_COMPOSE_VERSION:-1.6.0}"
PODMAN_COMPOSE_VENV="$REPO_ROOT/.stack/opt/podman-compose-venv"
RESULTS="$REPO_ROOT/test-artifacts"
PROJECT="$AGENTRUN_COMPOSE_PROJECT"
mkdir -p "$RESULTS"
MODE=test
if [ "${1:-}" = --bench ]; then MODE=bench; shift; fi

say() { printf '[compose] %s\n' "$*"; }
die() { printf '[compose] ERROR: %s\n' "$*" >&2; exit 1; }
port() { printf '%s%s' "$AGENTRUN_HOST_PORT_PREFIX" "$1"; } # the host port of a native-stack port
case "$AGENTRUN_HOST_PORT_PREFIX" in '' | [1-5]) ;; *) die "AGENTRUN_HOST_PORT_PREFIX must be empty or one digit 1-5, got '$AGENTRUN_HOST_PORT_PREFIX'" ;; esac

# ------------------------------------------------------------------------------------------------
# 1. Engine
# ------------------------------------------------------------------------------------------------
apt_install() { # PACKAGE...
  command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install $* by hand"
  say "installing Debian package(s): $*"
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null ||
    die "apt-get install $* failed"
}

ensure_podman() {
  local missing=()
  command -v podman >/dev/null 2>&1 || missing+=(podman)
  command -v runc >/dev/null 2>&1 || missing+=(runc)
  command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
  # Container names as host names (kafka:19092, postgres:5432): with Debian's CNI backend that takes the
  # dnsname plugin, which --no-install-recommends leaves out; without it every name lookup fails.
  [ -x /usr/lib/cni/dnsname ] || [ "$(podman info --format '{{.Host.NetworkBackend}}' 2>/dev/null)" = netavark ] ||
    missing+=(golang-github-containernetworking-plugin-dnsname)
  # The app services run with `init: true`; Podman starts catatonit as their PID 1 and finds it at
  # /usr/libexec/podman/catatonit. It is a Recommends of podman, so --no-install-recommends leaves it out too.
  [ -x /usr/libexec/podman/catatonit ] || missing+=(catatonit)
  [ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
  if [ ! -x "$PODMAN_COMPOSE_VENV/bin/podman-compose" ] ||
    [ "$(cat "$PODMAN_COMPOSE_VENV/.installed" 2>/dev/null)" != "podman-compose==$PODMAN_COMPOSE_VERSION" ]; then
    say "installing podman-compose $PODMAN_COMPOSE_VERSION (PyPI) into $PODMAN_COMPOSE_VENV"
    rm -rf "$PODMAN_COMPOSE_VENV"
    python3 -m venv "$PODMAN_COMPOSE_VENV" 2>/dev/null || { apt_install python3-venv && python3 -m venv "$PODMAN_COMPOSE_VENV"; } ||
      die "cannot make a Python venv for podman-compose"
    "$PODMAN_COMPOSE_VENV/bin/pip" install -q --disable-pip-version-check "podman-compose==$PODMAN_COMPOSE_VERSION" ||
      die "pip install podman-compose==$PODMAN_COMPOSE_VERSION failed"
    echo "podman-compose==$PODMAN_COMPOSE_VERSION" >"$PODMAN_COMPOSE_VENV/.installed"
  fi
  # runc and explicit ulimits (see the file): without them no container starts on hosts like this one.
  export CONTAINERS_CONF="${CONTAINERS_CONF:-$REPO_ROOT/deploy/compose/podman/containers.conf}"
}

ENGINE="${AGENTRUN_COMPOSE_ENGINE:-}"
if [ -z "$ENGINE" ]; then
  if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1 && docker compose version >/dev/null 2>&1; then
    ENGINE=docker
  else
    ENGINE=podman
  fi
fi
case "$ENGINE" in
  docker)
    COMPOSE=(docker compose -p "$PROJECT" -f docker-compose.yml)
    ;;
  podman)
    ensure_podman
    COMPOSE=("$PODMAN_COMPOSE_VENV/bin/podman-compose" -p "$PROJECT" -f docker-compose.yml -f deploy/compose/local-images.yml)
    ;;
  *) die "AGENTRUN_COMPOSE_ENGINE must be docker or podman, got '$ENGINE'" ;;
esac
say "engine $ENGINE ($("$ENGINE" --version 2>/dev/null | head -n1)), project $PROJECT, host ports prefixed '${AGENTRUN_HOST_PORT_PREFIX}'"
# The compose command as one line, for the tests that restart a service.
AGENTRUN_COMPOSE_CMD="$(printf '%q ' "${COMPOSE[@]}")"
export AGENTRUN_COMPOSE_ENGINE="$ENGINE" AGENTRUN_COMPOSE_CMD
compose() { "${COMPOSE[@]}" "$@"; }
# What `up` says goes to a log (Podman without systemd complains on every start that it cannot
# schedule healthchecks: true, and harmless, since readiness here is polled); shown when a stage fails.
UP_LOG="$REPO_ROOT/.stack/compose/up.log"
mkdir -p "$(dirname "$UP_LOG")"
: >"$UP_LOG"
up() { # SERVICE...
  "${COMPOSE[@]}" up -d --no-deps "$@" >>"$UP_LOG" 2>&1 || { tail -n 30 "$UP_LOG" >&2; return 1; }
}

# ------------------------------------------------------------------------------------------------
# Containers of this project, by the labels both engines put on them
# ------------------------------------------------------------------------------------------------
container_of() { # SERVICE -> id of its (newest) container
  "$ENGINE" ps -a -q --filter "label=com.docker.compose.project=$PROJECT" --filter "label=com.docker.compose.service=$1" | head -n1
}

show_logs() { # SERVICE...
  local s id
  for s in "$@"; do
    id="$(container_of "$s")"
    if [ -z "$id" ]; then echo "--- $s: no container" >&2; continue; fi
    echo "--- $s: $("$ENGINE" inspect -f '{{.State.Status}} (exit {{.State.ExitCode}})' "$id" 2>/dev/null), last log lines:" >&2
    "$ENGINE" logs --tail 40 "$id" 2>&1 | sed 's/^/    /' >&2
  done
}

cleanup() {
  local ids
  if [ "${AGENTRUN_COMPOSE_KEEP:-0}" = 1 ]; then say "AGENTRUN_COMPOSE_KEEP=1: leaving $PROJECT up"; return 0; fi
  # Stopped by compose (stop_grace_period honoured), then removed with their anonymous volumes, which
  # podman-compose's down leaves (an image's VOLUME used without a mount).
  compose stop -t 30 >/dev/null 2>&1
  ids="$("$ENGINE" ps -a -q --filter "label=com.docker.compose.project=$PROJECT")"
  [ -z "$ids" ] || "$ENGINE" rm -f -v $ids >/dev/null 2>&1
  compose down -v -t 30 >/dev/null 2>&1
  ids="$("$ENGINE" volume ls -q --filter "label=com.docker.compose.project=$PROJECT")"
  [ -z "$ids" ] || "$ENGINE" volume rm -f $ids >/dev/null 2>&1
  ids="$("$ENGINE" network ls -q --filter "label=com.docker.compose.project=$PROJECT")"
  [ -z "$ids" ] || "$ENGINE" network rm $ids >/dev/null 2>&1
  if [ -n "$("$ENGINE" ps -a -q --filter "label=com.docker.compose.project=$PROJECT")" ]; then
    say "WARNING: containers of $PROJECT are left: $("$ENGINE" ps -a --filter "label=com.docker.compose.project=$PROJECT" --format '{{.Names}}' | tr '\n' ' ')"
  else
    say "down: no container of $PROJECT is left"
  fi
}

fail() { # MESSAGE [SERVICE...]: print the services' last log lines, then leave (cleanup runs on EXIT)
  local msg="$1"
  shift
  printf '[compose] FAILED: %s\n' "$msg" >&2
  [ $# -eq 0 ] || show_logs "$@"
  exit 1
}

# ------------------------------------------------------------------------------------------------
# Readiness, bounded
# ------------------------------------------------------------------------------------------------
deadline() { echo $(( $(date +%s) + READY_TIMEOUT_S )); }

port_open() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; } # PORT
http_ok() { curl -fsS -o /dev/null --max-time 3 "$1" 2>/dev/null; }                # URL

wait_until() { # PROBE WHAT SERVICE:TARGET...: PROBE TARGET succeeds for every one, within the bound
  local probe="$1" what="$2" until pending s
  shift 2
  until="$(deadline)"
  pending=("$@")
  while [ ${#pending[@]} -gt 0 ]; do
    local left=()
    for s in "${pending[@]}"; do "$probe" "${s#*:}" || left+=("$s"); done
    pending=("${left[@]+"${left[@]}"}")
    [ ${#pending[@]} -eq 0 ] && break
    [ "$(date +%s)" -lt "$until" ] || fail "$what after ${READY_TIMEOUT_S}s: ${pending[*]%%:*}" "${pending[@]%%:*}"
    sleep 1
  done
}
wait_ports() { wait_until port_open "not listening" "$@"; } # SERVICE:PORT...
wait_http() { wait_until http_ok "not ready" "$@"; }        # SERVICE:URL... (2xx)

wait_exited() { # SERVICE...: the one-shot services ran to exit code 0
  local until s id state
  until="$(deadline)"
  for s in "$@"; do
    while :; do
      id="$(container_of "$s")"
      state="$([ -n "$id" ] && "$ENGINE" inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$id" 2>/dev/null)"
      case "$state" in
        exited\ 0) say "$s: done"; break ;;
        exited\ *) fail "$s exited with code ${state#exited }" "$s" ;;
      esac
      [ "$(date +%s)" -lt "$until" ] || fail "$s did not finish within ${READY_TIMEOUT_S}s" "$s"
      sleep 1
    done
  done
}

timed() { # LABEL CMD...
  local label="$1" t0 rc
  shift
  t0=$(date +%s)
  "$@"
  rc=$?
  say "$label: $(( $(date +%s) - t0 ))s"
  return $rc
}

# ------------------------------------------------------------------------------------------------
# 2. Images, secrets
# ------------------------------------------------------------------------------------------------
T0=$(date +%s)
[ -d node_modules ] || { say "npm ci (jest runs the tier)"; npm ci --no-audit --no-fund >/dev/null || die "npm ci failed"; }
bash deploy/compose/make-secrets.sh >/dev/null || die "deploy/compose/make-secrets.sh failed"

trap cleanup EXIT
trap 'exit 130' INT TERM
# Leftovers of an interrupted earlier run under the same project name.
compose down -v -t 10 >/dev/null 2>&1

if [ "$ENGINE" = podman ]; then
  timed "images" bash deploy/compose/images.sh || fail "an image did not build (see above)"
else
  timed "images (pull + app build)" bash -c "$(printf '%q ' "${COMPOSE[@]}") pull --ignore-buildable --quiet && $(printf '%q ' "${COMPOSE[@]}") build" ||
    fail "the images could not be pulled or built"
fi

# ------------------------------------------------------------------------------------------------
# 3. Up, in stages
# ------------------------------------------------------------------------------------------------
APPS=(gateway orchestrator gpu-worker projector snapshotter)
STORES=()
INITS=(kafka-init temporal-init migrate)
if [ "$ENGINE" = docker ]; then STORES=(minio); INITS+=(minio-init); fi
t_up=$(date +%s)

# Servers: temporal needs its volume chowned first.
up kafka postgres temporal-data-init "${STORES[@]+"${STORES[@]}"}" || fail "compose up (servers) failed" kafka postgres
wait_exited temporal-data-init
up temporal || fail "compose up temporal failed" temporal
server_ports=("kafka:$(port 9092)" "postgres:$(port 5432)" "temporal:$(port 7233)")
[ "$ENGINE" = docker ] && server_ports+=("minio:$(port 9000)")
wait_ports "${server_ports[@]}"
say "servers listening: $(( $(date +%s) - t_up ))s"

# One-shot setup: topics, namespace and search attributes, the schema (and the bucket).
up "${INITS[@]}" || fail "compose up (setup) failed" "${INITS[@]}"
wait_exited "${INITS[@]}"

# The apps.
up model-server "${APPS[@]}" || fail "compose up (apps) failed" "${APPS[@]}"
wait_http "model-server:http://127.0.0.1:$(port 8090)/healthz" \
  "gateway:http://127.0.0.1:$(port 8080)/readyz" "orchestrator:http://127.0.0.1:$(port 8081)/readyz" \
  "gpu-worker:http://127.0.0.1:$(port 8082)/readyz" "projector:http://127.0.0.1:$(port 8083)/readyz" \
  "snapshotter:http://127.0.0.1:$(port 8084)/readyz"
say "ready: $(( $(date +%s) - t_up ))s after the first up"

# An API token for the tier, made inside the gateway container with its own settings (the apps run in
# production mode: no X-Org, tokens only).
token_out="$(compose exec -T gateway node tools/token.js create --org compose-e2e --subject alice --label compose-tier 2>/dev/null)" ||
  fail "tools/token.js create failed in the gateway container" gateway
AGENTRUN_COMPOSE_TOKEN="$(printf '%s\n' "$token_out" | awk '$1 == "token:" { print $2 }')"
[ -n "$AGENTRUN_COMPOSE_TOKEN" ] || fail "no token in the output of tools/token.js create"
export AGENTRUN_COMPOSE_TOKEN AGENTRUN_COMPOSE_ORG=compose-e2e
# And a command key of the same org, made in the orchestrator's container (which has the secret keys
# derive from): commands the tier publishes on Kafka are signed with it.
key_out="$(compose exec -T orchestrator node tools/token.js command-key create --org compose-e2e 2>/dev/null)" ||
  fail "tools/token.js command-key create failed in the orchestrator container" orchestrator
AGENTRUN_COMPOSE_COMMAND_KEY_ID="$(printf '%s\n' "$key_out" | awk '$1 == "id:" { print $2 }')"
AGENTRUN_COMPOSE_COMMAND_KEY="$(printf '%s\n' "$key_out" | awk '$1 == "key:" { print $2 }')"
[ -n "$AGENTRUN_COMPOSE_COMMAND_KEY" ] || fail "no key in the output of tools/token.js command-key create"
export AGENTRUN_COMPOSE_COMMAND_KEY_ID AGENTRUN_COMPOSE_COMMAND_KEY

# ------------------------------------------------------------------------------------------------
# 4. The tier (or the benchmark)
# ------------------------------------------------------------------------------------------------
if [ "$MODE" = bench ]; then
  [ -f dist/tests/bench/compose.bench.js ] || fail "dist/tests/bench/compose.bench.js is missing: run it as npm run bench:compose"
  bash deploy/local/stack.sh status >/dev/null 2>&1 || bash deploy/local/stack.sh up || fail "the native stack did not start"
  node dist/tests/bench/compose.bench.js "$@"
  rc=$?
  trap - EXIT
  cleanup
  exit $rc
fi
rm -f "$RESULTS/compose.json"
t_jest=$(date +%s)
npx jest --selectProjects compose --runInBand --forceExit --json --outputFile="$RESULTS/compose.json" "$@"
rc=$?
say "jest: $(( $(date +%s) - t_jest ))s"
if [ $rc -ne 0 ]; then show_logs "${APPS[@]}"; fi
trap - EXIT
cleanup
say "total: $(( $(date +%s) - T0 ))s"
if [ -f "$RESULTS/compose.json" ]; then
  node -e "const r=require('$RESULTS/compose.json'); console.log('tests: ' + r.numPassedTests + ' passed, ' + (r.numFailedTests + (r.numRuntimeErrorTestSuites||0)) + ' failed')"
fi
exit $rc
