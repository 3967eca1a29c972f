#!/usr/bin/env bash
# kafka-run-class.sh CLASS [ARGS...]: runs a Kafka class on the image's jars (a small stand-in for
# Kafka's own script). JVM options come from KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS,
# KAFKA_LOG4J_OPTS (default: tool logging, WARN to stderr) and KAFKA_OPTS.
set -euo pipefail
[ "$#" -ge 1 ] || { echo "USAGE: $0 CLASS [ARGS...]" >&2; exit 1; }
KAFKA_HOME=/opt/kafka
# shellcheck disable=SC2086
exec java ${KAFKA_HEAP_OPTS:--Xmx256m} \
  ${KAFKA_JVM_PERFORMANCE_OPTS:--server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true} \
  ${KAFKA_LOG4J_OPTS:--Dlog4j2.configurationFile=$KAFKA_HOME/config/tools-log4j2.xml} ${KAFKA_OPTS:-} \
  -cp "$KAFKA_HOME/libs/*" "$@"
