#!/bin/sh
# kafka-broker-api-versions.sh of the official image, for the compose healthcheck.
exec java -Xmx128m -Dlog4j2.level=ERROR -cp '/opt/kafka/libs/*' \
  org.apache.kafka.tools.BrokerApiVersionsCommand "$@"
