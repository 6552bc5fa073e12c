#!/bin/sh
# The Kafka image's entrypoint (compose/kafka.Dockerfile). With CLUSTER_ID set, formats the node's KRaft storage
# first (once: --ignore-formatted; KAFKA_FORMAT_ARGS adds e.g. --feature transaction.version=2); the secured
# profile formats in a one-shot container instead. Then runs the broker on $KAFKA_PROPERTIES in the foreground,
# its log on the container's output. With arguments, runs `java -cp <the release's jars>` on them instead.
set -eu
libs='/opt/kafka/libs/*'
props="${KAFKA_PROPERTIES:-/etc/kafka/server.properties}"
if [ "$#" -gt 0 ]; then
  exec java -cp "$libs" "$@"
fi
if [ -n "${CLUSTER_ID:-}" ]; then
  # shellcheck disable=SC2086
  java -cp "$libs" kafka.tools.StorageTool format -t "$CLUSTER_ID" -c "$props" --ignore-formatted ${KAFKA_FORMAT_ARGS:-}
fi
# shellcheck disable=SC2086
exec java ${KAFKA_HEAP_OPTS:--Xms768m -Xmx768m} -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
  -Djava.awt.headless=true -Dkafka.logs.dir=/var/lib/kafka/logs -Dtxnlab.log.appender=console \
  -Dlog4j2.configurationFile=/opt/kafka/config/log4j2.properties -cp "$libs" kafka.Kafka "$props"
