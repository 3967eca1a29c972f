#!/usr/bin/env bash
# Kafka broker entrypoint, as the apache/kafka image behaves for docker-compose.yml:
# - every KAFKA_<NAME> env var except the JVM ones is a server.properties line
#   (KAFKA_ dropped; `___` -> `-`, `__` -> `_`, `_` -> `.`; lowercased);
# - CLUSTER_ID formats the first log dir when its meta.properties is absent;
# - then the JVM replaces this shell, so SIGTERM from `stop` reaches it (clean shutdown).
set -euo pipefail
KAFKA_HOME=/opt/kafka
PROPS="${KAFKA_SERVER_PROPERTIES_FILE:-$KAFKA_HOME/config/server.properties}"
: "${KAFKA_HEAP_OPTS:=-Xms256m -Xmx512m}"
: "${KAFKA_JVM_PERFORMANCE_OPTS:=-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true}"
: "${KAFKA_LOG4J_OPTS:=-Dlog4j2.configurationFile=$KAFKA_HOME/config/log4j2.xml}"

if [ "$#" -gt 0 ]; then exec "$@"; fi # e.g. `run ... kafka-topics.sh --list ...` or a shell

tmp="$PROPS.tmp"
: >"$tmp"
n=0
while IFS= read -r -d '' kv; do
  name="${kv%%=*}"
  value="${kv#*=}"
  case "$name" in
    KAFKA_HEAP_OPTS | KAFKA_OPTS | KAFKA_JVM_PERFORMANCE_OPTS | KAFKA_LOG4J_OPTS | KAFKA_JMX_OPTS | KAFKA_GC_LOG_OPTS) continue ;;
    KAFKA_SERVER_PROPERTIES_FILE) continue ;;
    KAFKA_?*) ;;
    *) continue ;;
  esac
  key="${name#KAFKA_}"
  key="${key//___/-}"
  key="${key//__/$'\001'}"
  key="${key//_/.}"
  key="${key//$'\001'/_}"
  key="${key,,}"
  printf '%s=%s\n' "$key" "$value" >>"$tmp"
  n=$((n + 1))
done < <(env -0)
[ "$n" -gt 0 ] || { echo "kafka-entrypoint: no KAFKA_* settings in the environment (KAFKA_NODE_ID, KAFKA_PROCESS_ROLES, ...)" >&2; exit 2; }
sort -o "$tmp" "$tmp"
mv -f "$tmp" "$PROPS"

log_dirs="$(sed -n -e 's/^log\.dirs=//p' -e 's/^log\.dir=//p' "$PROPS" | head -n 1)"
log_dir="${log_dirs%%,*}"
log_dir="${log_dir:-/tmp/kraft-combined-logs}"
if [ -n "${CLUSTER_ID:-}" ] && [ ! -f "$log_dir/meta.properties" ]; then
  echo "kafka-entrypoint: formatting $log_dir for cluster $CLUSTER_ID"
  # shellcheck disable=SC2086
  java -Xmx256m $KAFKA_LOG4J_OPTS -cp "$KAFKA_HOME/libs/*" kafka.tools.StorageTool format \
    --ignore-formatted -t "$CLUSTER_ID" -c "$PROPS"
fi

# shellcheck disable=SC2086
exec java $KAFKA_HEAP_OPTS $KAFKA_JVM_PERFORMANCE_OPTS ${KAFKA_GC_LOG_OPTS:-} ${KAFKA_JMX_OPTS:-} $KAFKA_LOG4J_OPTS ${KAFKA_OPTS:-} \
  -cp "$KAFKA_HOME/libs/*" kafka.Kafka "$PROPS"
