#!/bin/sh
# The official apache/kafka image's configuration rule: each KAFKA_* variable is a broker
# property, lower-cased, with '_' -> '.', '__' -> '_' and '___' -> '-'
# (KAFKA_NODE_ID=1 -> node.id=1). CLUSTER_ID names the KRaft cluster; storage is formatted once.
set -eu
conf=/opt/kafka/server.properties
: > "$conf"
env | grep '^KAFKA_' | while IFS='=' read -r name value; do
  case $name in KAFKA_HEAP_OPTS|KAFKA_OPTS|KAFKA_JVM_PERFORMANCE_OPTS|KAFKA_LOG4J_OPTS) continue;; esac
  key=$(printf '%s' "${name#KAFKA_}" | tr 'A-Z' 'a-z' | sed 's/___/-/g; s/__/@/g; s/_/./g; s/@/_/g')
  printf '%s=%s\n' "$key" "$value" >> "$conf"
done
grep -q '^log.dirs=' "$conf" || echo 'log.dirs=/var/lib/kafka/data' >> "$conf"
jvm_opts="${KAFKA_HEAP_OPTS:--Xms256m -Xmx1g} ${KAFKA_OPTS:-}"
jvm_opts="$jvm_opts -Dlog4j2.configurationFile=/opt/kafka/log4j2.yaml"
# shellcheck disable=SC2086 # the options are words
java $jvm_opts -cp '/opt/kafka/libs/*' kafka.tools.StorageTool format --ignore-formatted \
  -t "${CLUSTER_ID:-5L6g3nShT-eMCtK--X86sw}" -c "$conf" > /dev/null
# shellcheck disable=SC2086
exec java $jvm_opts -cp '/opt/kafka/libs/*' kafka.Kafka "$conf"
