#!/usr/bin/env bash
# The whole platform on this machine: the servers (stack.sh) and the five services from built output.
#
#   bash deploy/local/platform.sh start      install what is missing, build, start everything, start a demo
#                                            run, then follow the logs until Ctrl-C (which stops everything)
#   bash deploy/local/platform.sh stop       stop the services and the servers
#   bash deploy/local/platform.sh apps-up    start the five services (servers must be up)
#   bash deploy/local/platform.sh apps-down  stop the five services (SIGTERM: they drain, then exit)
#   bash deploy/local/platform.sh status
#
# Workspace hosts: AGENTRUN_HOSTS=N (default 1) with N >= 2 runs N workspace hosts h1..hN instead of
# one orchestrator/snapshotter pair sharing one workspace volume. Then the processes are:
#   model-server, gateway (:8080), projector (:8083), the main orchestrator (:8081,
#   ORCHESTRATOR_ROLES=commands,workflows; pid file orchestrator.pid), ONE shared gpu-worker (:8082, pid
#   file gpu-worker.pid, no AGENTRUN_WORKSPACE_HOST_ID: it serves the shared gpu-tools and gpu-eval lanes
#   for every host, on a restored copy of the staged workspace), and for each host hK (K = 1..N)
#   orchestrator@hK (ORCHESTRATOR_ROLES=cpu-tools)  port HOST_PORT_BASE + 10*(K-1) + 1
#   snapshotter@hK                                 port HOST_PORT_BASE + 10*(K-1) + 4
# (HOST_PORT_BASE 8180: h1 8181/8184, h2 8191/8194, ... h9 8261/8264; N <= 9), each with
# AGENTRUN_WORKSPACE_HOST_ID=hK and WORKSPACE_ROOT=.stack/data/hosts/hK/workspaces (no path shared
# between hosts; OBJECT_STORE_DIR stays the one .stack/data/objects, standing for the object store).
# Pid files .stack/run/apps/<app>@<host>.pid, logs .stack/logs/apps/<app>@<host>.log. apps-up records
# N in .stack/run/apps/hosts: status uses it when AGENTRUN_HOSTS is unset; apps-down and stop stop
# every instance that has a pid file, whatever N was. The secure profile runs N = 1 only.
#
# A real model: MODEL_PROFILE=smollm also runs model-real, SmolLM2-135M-Instruct on the CPU behind the same
# OpenAI-compatible protocol (apps/model-server/src/real, port MODEL_REAL_PORT 8091, health /healthz;
# deploy/local/model-real.sh fetches it into .stack/opt on first use). The apps then talk to it: unless
# the caller set them, MODEL_BASE_URL is its URL and MODEL_NAME its model, and the scripted model-server
# still runs beside it as the named model endpoint `scripted` (AGENTRUN_MODEL_ENDPOINTS) for evals that
# want it. Unset (or MODEL_PROFILE=scripted), nothing changes. apps-up records the profile in
# .stack/run/apps/model-profile for status; apps-down and stop stop model-real whatever the profile.
#
# Observability: AGENTRUN_STACK_PROFILE=observability (or secure,observability) also runs Debian's
# Prometheus server (stack.sh) and `start` prints its URL. apps-up writes every app instance's health port
# (GET /metrics) to .stack/conf/prometheus/targets/apps.json, which it scrapes (file_sd, labels
# component=<instance> and app=<app>); apps-down removes the file.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
# shellcheck source=stack.env
. "$SCRIPT_DIR/stack.env"
cd "$REPO_ROOT"

APPS=(orchestrator gpu-worker snapshotter projector gateway)
# The local OpenAI-compatible model server, unless MODEL_BASE_URL points at a real one.
MODEL_SERVER_PORT="${MODEL_SERVER_PORT:-8090}"
USE_LOCAL_MODEL=$([ -z "${MODEL_BASE_URL:-}" ] && echo 1 || echo 0)
# MODEL_PROFILE=smollm: the real small model as well (see the header).
MODEL_REAL_PORT="${MODEL_REAL_PORT:-8091}"
MODEL_REAL_NAME="${MODEL_REAL_NAME:-smollm2-135m-instruct}"
APP_RUN_DIR="$REPO_ROOT/.stack/run/apps"
APP_LOG_DIR="$REPO_ROOT/.stack/logs/apps"
APP_STOP_TIMEOUT="${APP_STOP_TIMEOUT:-30}"
APP_READY_TIMEOUT="${APP_READY_TIMEOUT:-90}"

SECURE_DIR="$REPO_ROOT/.stack/secure"

# The apps each workspace host runs, and where hosts' ports start (see the header). GPU tools are not
# host work: the one shared gpu-worker serves every host.
HOST_APPS=(orchestrator snapshotter)
HOST_PORT_BASE="${HOST_PORT_BASE:-8180}"
HOSTS_DIR="$REPO_ROOT/.stack/data/hosts"
HOSTS_FILE="$APP_RUN_DIR/hosts"
MODEL_PROFILE_FILE="$APP_RUN_DIR/model-profile"
# What the observability profile's Prometheus scrapes (stack.sh reads every *.json file here).
PROMETHEUS_TARGETS_FILE="$REPO_ROOT/.stack/conf/prometheus/targets/apps.json"

say() { printf '[platform] %s\n' "$*"; }
# The profile the stack runs in, as stack.sh recorded it (plain, secure; none when it is down).
stack_profile() { cat "$REPO_ROOT/.stack/profile" 2>/dev/null || echo none; }
die() { printf '[platform] ERROR: %s\n' "$*" >&2; exit 1; }

# An instance is an app (gateway) or one workspace host's copy of it (snapshotter@h2).
app_of() { echo "${1%%@*}"; }
host_of() { case "$1" in *@*) echo "${1#*@}" ;; *) echo "" ;; esac; }

port_of() { # INSTANCE -> its port
  local host k offset
  host="$(host_of "$1")"
  if [ -n "$host" ]; then
    k="${host#h}"
    # + 2 is no host app's now: gpu-worker@hK is only an earlier layout's instance that status still names.
    case "$(app_of "$1")" in orchestrator) offset=1 ;; gpu-worker) offset=2 ;; snapshotter) offset=4 ;; esac
    echo $(( HOST_PORT_BASE + 10 * (k - 1) + offset ))
    return
  fi
  case "$1" in
    gateway) echo "${GATEWAY_PORT}" ;;
    orchestrator) echo "${ORCHESTRATOR_PORT:-8081}" ;;
    gpu-worker) echo "${GPU_WORKER_PORT:-8082}" ;;
    projector) echo "${PROJECTOR_PORT:-8083}" ;;
    snapshotter) echo "${SNAPSHOTTER_PORT:-8084}" ;;
    model-server) echo "${MODEL_SERVER_PORT}" ;;
    model-real) echo "${MODEL_REAL_PORT}" ;;
  esac
}

main_of() { # INSTANCE -> the script it runs
  case "$1" in
    model-real) echo "apps/model-server/dist/real/main.js" ;;
    *) echo "apps/$(app_of "$1")/dist/main.js" ;;
  esac
}

# The model profile: MODEL_PROFILE, else (status) what apps-up recorded, else scripted.
model_profile() {
  local p="${MODEL_PROFILE:-}"
  if [ -z "$p" ] && [ "${1:-}" = recorded ] && [ -f "$MODEL_PROFILE_FILE" ]; then p="$(cat "$MODEL_PROFILE_FILE")"; fi
  p="${p:-scripted}"
  case "$p" in scripted | smollm) echo "$p" ;; *) die "MODEL_PROFILE must be scripted or smollm, got '$p'" ;; esac
}

# How many workspace hosts: AGENTRUN_HOSTS, else (status) what apps-up recorded, else 1.
host_count() {
  local n="${AGENTRUN_HOSTS:-}"
  if [ -z "$n" ] && [ "${1:-}" = recorded ] && [ -f "$HOSTS_FILE" ]; then n="$(cat "$HOSTS_FILE")"; fi
  n="${n:-1}"
  [[ "$n" =~ ^[1-9]$ ]] || die "AGENTRUN_HOSTS must be a number from 1 to 9, got '$n'"
  echo "$n"
}

app_pid() { # INSTANCE -> pid if running
  local f="$APP_RUN_DIR/$1.pid" pid
  [ -f "$f" ] || return 1
  pid="$(cat "$f")"
  if kill -0 "$pid" 2>/dev/null && ps -p "$pid" -o command= 2>/dev/null | grep -q "$(main_of "$1")"; then
    echo "$pid"
    return 0
  fi
  rm -f "$f"
  return 1
}

ensure_installed() {
  if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    say "installing npm packages (npm ci)"
    npm ci --no-audit --no-fund
  fi
  # The sandbox the agents' `exec` tool runs in (bubblewrap); a machine that cannot make one still starts,
  # and the workers leave `exec` out and say why.
  bash "$SCRIPT_DIR/ensure-bubblewrap.sh" || say "bubblewrap is not installed: agents get no exec tool"
}

build() {
  say "building"
  npm run --silent build
}

# The one place this script sets the apps' environment; every app inherits all of it and reads only the
# groups its spec declares. The run defaults (AGENTRUN_STEPS_PER_EXECUTION, AGENTRUN_HISTORY_*, EVAL_*, ...,
# libs/config runDefaultsSpec) are not set here: both the gateway and the orchestrator, the two services
# that start runs, inherit them unchanged from the caller's environment or use the same built-in defaults.
export_app_env() {
  # On the stack's secure profile, the servers are reached as .stack/secure/platform.env says (SASL_SSL
  # Kafka, Temporal over mTLS, Postgres with verify-full); each app adds its own Kafka identity at start.
  if [ "$(stack_profile)" = secure ]; then
    set -a
    # shellcheck disable=SC1091
    . "$SECURE_DIR/platform.env"
    set +a
  fi
  export AGENTRUN_MODE="${AGENTRUN_MODE:-local}"
  # The apps' log files (.stack/logs/apps/*.log) are JSON lines, one object per record (time, level,
  # service, context, msg; org, run_id, command_id, trace_id on lines about a run); the terminal of
  # `npm start` shows them as text (tools/pretty-logs.js). LOG_LEVEL=debug adds each activity attempt.
  export LOG_FORMAT="${LOG_FORMAT:-json}" LOG_LEVEL="${LOG_LEVEL:-info}"
  # The topics the stack made: one broker (each service checks its topics against these at start).
  export KAFKA_TOPIC_PARTITIONS KAFKA_REPLICATION_FACTOR KAFKA_MIN_INSYNC_REPLICAS KAFKA_RETENTION_MS
  export KAFKA_BROKERS="${KAFKA_BROKERS:-127.0.0.1:${KAFKA_PORT}}"
  export TEMPORAL_ADDRESS="${TEMPORAL_ADDRESS:-127.0.0.1:${TEMPORAL_PORT}}"
  export TEMPORAL_NAMESPACE
  export DATABASE_URL="${DATABASE_URL:-postgres://${POSTGRES_USER}:${POSTGRES_PASSWORD}@127.0.0.1:${POSTGRES_PORT}/${POSTGRES_DB}}"
  export WORKSPACE_ROOT="${WORKSPACE_ROOT:-$REPO_ROOT/.stack/data/workspaces}"
  export OBJECT_STORE_DIR="${OBJECT_STORE_DIR:-$REPO_ROOT/.stack/data/objects}"
  export WORKFLOW_BUNDLE_PATH="${WORKFLOW_BUNDLE_PATH:-$REPO_ROOT/libs/workflows/dist/workflow-bundle.js}"
  export GATEWAY_PORT ORCHESTRATOR_PORT="$(port_of orchestrator)" GPU_WORKER_PORT="$(port_of gpu-worker)"
  export PROJECTOR_PORT="$(port_of projector)" SNAPSHOTTER_PORT="$(port_of snapshotter)"
  if [ "$(model_profile)" = smollm ]; then
    # The apps' model is the real one unless the caller named another; the scripted server stays reachable
    # by endpoint name for evals (when it runs, and when the caller gave no endpoints of their own).
    export MODEL_REAL_PORT MODEL_REAL_NAME MODEL_NAME="${MODEL_NAME:-$MODEL_REAL_NAME}"
    export MODEL_BASE_URL="${MODEL_BASE_URL:-http://127.0.0.1:${MODEL_REAL_PORT}/v1}"
    if [ "$USE_LOCAL_MODEL" = 1 ] && [ -z "${AGENTRUN_MODEL_ENDPOINTS:-}" ]; then
      export AGENTRUN_MODEL_ENDPOINTS="{\"scripted\":{\"base_url\":\"http://127.0.0.1:${MODEL_SERVER_PORT}/v1\"}}"
    fi
  fi
  export MODEL_SERVER_PORT MODEL_BASE_URL="${MODEL_BASE_URL:-http://127.0.0.1:${MODEL_SERVER_PORT}/v1}"
}

services() { # [recorded] -> the instances apps-up starts (status: the ones it started), in order
  local n k app
  n="$(host_count "${1:-}")"
  if [ "$USE_LOCAL_MODEL" = 1 ]; then echo model-server; fi
  if [ "$(model_profile "${1:-}")" = smollm ]; then echo model-real; fi
  if [ "$n" = 1 ]; then
    printf '%s\n' "${APPS[@]}"
    return
  fi
  echo orchestrator
  echo gpu-worker
  for k in $(seq 1 "$n"); do
    for app in "${HOST_APPS[@]}"; do echo "$app@h$k"; done
  done
  echo projector
  echo gateway
}

running_instances() { # every instance with a pid file, whatever AGENTRUN_HOSTS was when it started
  local app f
  for app in "${APPS[@]}" model-server model-real; do
    for f in "$APP_RUN_DIR/$app.pid" "$APP_RUN_DIR/$app@"*.pid; do
      if [ -e "$f" ]; then basename "$f" .pid; fi
    done
  done
}

# The environment one instance adds to export_app_env's (run in the subshell that starts it).
instance_env() {
  local host
  host="$(host_of "$1")"
  if [ -n "$host" ]; then
    export AGENTRUN_WORKSPACE_HOST_ID="$host" WORKSPACE_ROOT="$HOSTS_DIR/$host/workspaces"
    case "$(app_of "$1")" in
      orchestrator) ORCHESTRATOR_PORT="$(port_of "$1")" && export ORCHESTRATOR_PORT ORCHESTRATOR_ROLES=cpu-tools ;;
      snapshotter) SNAPSHOTTER_PORT="$(port_of "$1")" && export SNAPSHOTTER_PORT ;;
    esac
  elif [ "$(host_count)" != 1 ]; then
    # Not a host process: the gateway, the projector, the shared gpu-worker (the shared gpu-tools and
    # gpu-eval lanes; its WORKSPACE_ROOT is not used by host runs), the main orchestrator (which keeps
    # the commands and workflows roles and leaves the cpu tool lanes to the hosts).
    unset AGENTRUN_WORKSPACE_HOST_ID
    if [ "$1" = orchestrator ]; then export ORCHESTRATOR_ROLES=commands,workflows; fi
  fi
}

health_path() { case "$1" in model-server | model-real) echo /healthz ;; *) echo /readyz ;; esac; }

# Whether a profile list (AGENTRUN_STACK_PROFILE, e.g. secure,observability) names WORD.
profile_has() { [[ ",${2// /}," == *",$1,"* ]]; }

# AGENTRUN_HOSTS is valid, and the profile runs it (secure: N = 1 only; PROFILE overrides the running one).
check_hosts() {
  local n profile="${1:-$(stack_profile)}"
  n="$(host_count)"
  if [ "$n" != 1 ] && profile_has secure "$profile"; then
    die "AGENTRUN_HOSTS=$n: the secure profile runs one workspace host only (its per-service settings are not made for host instances); unset AGENTRUN_HOSTS, or use the plain profile"
  fi
}

apps_up() {
  local n planned inst
  check_hosts
  model_profile >/dev/null # an unknown MODEL_PROFILE stops here, not inside a $(...)
  n="$(host_count)"
  mkdir -p "$APP_RUN_DIR" "$APP_LOG_DIR"
  # A running instance of another layout (hosts beyond N, or an earlier layout's gpu-worker@hK, or
  # model-real under another model profile) would serve what this one does not expect: stop first.
  planned=" $(services | tr '\n' ' ') "
  for inst in $(running_instances); do
    if app_pid "$inst" >/dev/null && [[ "$planned" != *" $inst "* ]]; then
      die "$inst is running but AGENTRUN_HOSTS=$n MODEL_PROFILE=$(model_profile) does not run it: apps-down first"
    fi
  done
  # The real model and node-llama-cpp are fetched once into .stack/opt (a no-op when present).
  if [ "$(model_profile)" = smollm ]; then bash "$SCRIPT_DIR/model-real.sh" install || die "could not install the real model"; fi
  echo "$n" >"$HOSTS_FILE"
  model_profile >"$MODEL_PROFILE_FILE"
  write_prometheus_targets
  export_app_env
  # The schema is migrated as its own step, as in production; the services then find it current.
  say "migrating the database"
  npm run --silent migrate || die "npm run migrate failed"
  local app pid port deadline log
  for app in $(services); do
    if pid="$(app_pid "$app")"; then
      say "$app already running (pid $pid)"
      continue
    fi
    [ -f "$(main_of "$app")" ] || die "$(main_of "$app") is missing: run npm run build"
    if [ -n "$(host_of "$app")" ]; then mkdir -p "$HOSTS_DIR/$(host_of "$app")/workspaces"; fi
    (
      instance_env "$app"
      if [ "$(stack_profile)" = secure ] && [ -f "$SECURE_DIR/env/$app.env" ]; then
        set -a
        # shellcheck disable=SC1090
        . "$SECURE_DIR/env/$app.env"
        set +a
      fi
      exec nohup node "$(main_of "$app")" >>"$APP_LOG_DIR/$app.log" 2>&1
    ) &
    echo $! >"$APP_RUN_DIR/$app.pid"
  done
  for app in $(services); do
    port="$(port_of "$app")"
    log="$APP_LOG_DIR/$app.log"
    deadline=$(( $(date +%s) + APP_READY_TIMEOUT ))
    until curl -fsS "http://127.0.0.1:$port$(health_path "$app")" >/dev/null 2>&1; do
      if ! app_pid "$app" >/dev/null; then
        tail -n 30 "$log" >&2 || true
        die "$app exited during start (log: $log)"
      fi
      [ "$(date +%s)" -lt "$deadline" ] || { tail -n 30 "$log" >&2; die "$app not ready after ${APP_READY_TIMEOUT}s"; }
      sleep 0.3
    done
    say "$app ready on :$port (pid $(app_pid "$app"))"
  done
}

# Every app instance's health port (GET /metrics there), labelled with the instance's name, for the
# observability profile's Prometheus (file_sd; written whether or not it runs, so a later
# `AGENTRUN_STACK_PROFILE=observability stack.sh up` finds the apps). The model servers serve none.
write_prometheus_targets() {
  local app first=1
  mkdir -p "$(dirname "$PROMETHEUS_TARGETS_FILE")"
  {
    echo "["
    for app in $(services); do
      case "$app" in model-server | model-real) continue ;; esac
      [ "$first" = 1 ] || echo ","
      first=0
      printf '  {"targets": ["127.0.0.1:%s"], "labels": {"component": "%s", "app": "%s"}}' "$(port_of "$app")" "$app" "$(app_of "$app")"
    done
    printf '\n]\n'
  } >"$PROMETHEUS_TARGETS_FILE.tmp"
  mv "$PROMETHEUS_TARGETS_FILE.tmp" "$PROMETHEUS_TARGETS_FILE"
}

apps_down() {
  local app pid waited instances
  declare -A pids=()
  instances="$(running_instances)"
  for app in $instances; do
    pid="$(app_pid "$app")" || continue
    pids[$app]="$pid"
    kill -TERM "$pid" 2>/dev/null || true
  done
  for app in $instances; do
    pid="${pids[$app]:-}"
    [ -n "$pid" ] || continue
    waited=0
    while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt $((APP_STOP_TIMEOUT * 10)) ]; do
      sleep 0.1
      waited=$((waited + 1))
    done
    if kill -0 "$pid" 2>/dev/null; then
      say "$app did not stop in ${APP_STOP_TIMEOUT}s; killing"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$APP_RUN_DIR/$app.pid"
    say "$app stopped"
  done
  if [ -z "$(running_instances)" ]; then rm -f "$HOSTS_FILE" "$MODEL_PROFILE_FILE" "$PROMETHEUS_TARGETS_FILE"; fi
}

demo_run() {
  local id="demo-$(date +%s)"
  curl -fsS -X POST "http://127.0.0.1:${GATEWAY_PORT}/agents" -H 'Content-Type: application/json' -H 'X-Org: demo' \
    -d "{\"run_id\":\"$id\",\"goal\":\"take a first look around the workspace\",\"max_steps\":12}" >/dev/null
  echo "$id"
}

start() {
  local t0 demo
  t0=$(date +%s)
  check_hosts "$AGENTRUN_STACK_PROFILE"
  model_profile >/dev/null
  ensure_installed
  build
  bash "$SCRIPT_DIR/stack.sh" up
  apps_up
  demo="$(demo_run)"
  cat <<MSG

AgentRun is up in $(( $(date +%s) - t0 ))s (local mode: the org comes from the X-Org header).
  gateway      http://127.0.0.1:${GATEWAY_PORT}
  dashboard    http://127.0.0.1:${GATEWAY_PORT}/ui/   (sign in with org 'demo', or a token from 'npm run token')
  API docs     http://127.0.0.1:${GATEWAY_PORT}/docs
  Temporal UI  http://127.0.0.1:${TEMPORAL_UI_PORT}
  demo run     curl -N -H 'X-Org: demo' http://127.0.0.1:${GATEWAY_PORT}/runs/${demo}/events
  logs         .stack/logs/apps/*.log, JSON lines   (servers: .stack/logs/; as text: tail -F .stack/logs/apps/*.log | node tools/pretty-logs.js)
Ctrl-C here, or 'npm run stop' elsewhere, stops everything.

MSG
  if [ "$(host_count)" != 1 ]; then
    local k
    echo "Workspace hosts (AGENTRUN_HOSTS=$(host_count)), each with its own workspace root .stack/data/hosts/<host>/workspaces:"
    for k in $(seq 1 "$(host_count)"); do
      printf '  h%s  orchestrator@h%s :%s  snapshotter@h%s :%s\n' "$k" \
        "$k" "$(port_of "orchestrator@h$k")" "$k" "$(port_of "snapshotter@h$k")"
    done
    echo "  GPU tools of every host: the shared gpu-worker :$(port_of gpu-worker)"

    echo
  fi
  if [ "$(model_profile)" = smollm ]; then
    cat <<MSG
Model profile smollm: the apps' model is ${MODEL_NAME:-$MODEL_REAL_NAME} at ${MODEL_BASE_URL:-http://127.0.0.1:${MODEL_REAL_PORT}/v1}
  model-real   http://127.0.0.1:${MODEL_REAL_PORT}/v1   (SmolLM2-135M-Instruct on the CPU; log .stack/logs/apps/model-real.log)

MSG
  fi
  if profile_has observability "$AGENTRUN_STACK_PROFILE"; then
    cat <<MSG
Observability profile: Prometheus scrapes every app's /metrics every ${PROMETHEUS_SCRAPE_INTERVAL}, with deploy/prometheus/rules.yml loaded.
  Prometheus   http://127.0.0.1:${PROMETHEUS_PORT}   (alerts /alerts, targets /targets; data .stack/data/prometheus)

MSG
  fi
  if [ "$(stack_profile)" = secure ]; then
    cat <<MSG
Secure profile: Kafka SASL_SSL with ACLs, Postgres TLS only, Temporal over mTLS (files in .stack/secure/).
  as the outside client   .stack/secure/kcat -F .stack/secure/client.properties -t agentrun.run-events.v1 -C

MSG
  fi
  if [ "${AGENTRUN_DETACH:-0}" = "1" ] || [ ! -t 0 ]; then
    return 0
  fi
  trap 'echo; stop; exit 0' INT TERM
  tail -n 0 -F "$APP_LOG_DIR"/*.log | node tools/pretty-logs.js &
  wait $!
}

stop() {
  apps_down
  bash "$SCRIPT_DIR/stack.sh" down
}

status() {
  local app pid rc=0 expected host
  bash "$SCRIPT_DIR/stack.sh" status || rc=1
  expected=" $(services recorded | tr '\n' ' ') "
  [ "$(host_count recorded)" = 1 ] || say "workspace hosts: $(host_count recorded)"
  for app in $(services recorded); do
    host="$(host_of "$app")"
    if pid="$(app_pid "$app")"; then
      say "${host:+[$host] }$app running (pid $pid, :$(port_of "$app"))"
    else
      say "${host:+[$host] }$app stopped"
      rc=1
    fi
  done
  # Anything else still running from an earlier apps-up with another AGENTRUN_HOSTS.
  for app in $(running_instances); do
    [[ "$expected" != *" $app "* ]] || continue
    if pid="$(app_pid "$app")"; then say "$app running (pid $pid, :$(port_of "$app")), not part of this layout"; rc=1; fi
  done
  return $rc
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  apps-up) apps_up ;;
  apps-down) apps_down ;;
  status) host_count recorded >/dev/null; model_profile recorded >/dev/null; status ;;
  *) die "usage: platform.sh start|stop|apps-up|apps-down|status" ;;
esac
