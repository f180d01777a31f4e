# CI stand-in for apache/kafka, for machines with no image registry: the same Kafka release the
# project tests against (jvm/kafka-broker/pom.xml, from Maven Central), configured from the same
# KAFKA_* variables as the official image, with the broker-api-versions tool its healthcheck
# calls. Tagged logcount-ci/kafka, never apache/kafka. Built by docker/compose.ci.yaml.
ARG BASE=debian:bookworm-slim
FROM ${BASE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends maven openjdk-17-jre-headless unzip \
 && rm -rf /var/lib/apt/lists/*
COPY jvm /build/jvm
RUN /build/jvm/fetch.sh /build/jvm/kafka-broker /opt/kafka/libs && rm -rf /build /root/.m2 \
 && apt-get purge -y --auto-remove maven unzip && rm -f /opt/kafka/libs.log
COPY docker/ci/kafka-entrypoint.sh /opt/kafka/entrypoint.sh
COPY docker/ci/kafka-log4j2.yaml /opt/kafka/log4j2.yaml
COPY docker/ci/kafka-tool.sh /opt/kafka/bin/kafka-broker-api-versions.sh
ENTRYPOINT ["/opt/kafka/entrypoint.sh"]
