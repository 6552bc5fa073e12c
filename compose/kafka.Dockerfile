# A Kafka node of the compose stack: Apache Kafka assembled from Maven Central exactly as the local launcher's
# (cluster/lab/pom.xml, cluster/lab/install.py), on a JRE from Debian. Any release of KAFKA_VERSIONS:
#   docker build --build-arg KAFKA_VERSION=3.9.1 -f compose/kafka.Dockerfile .
# The node's server.properties is mounted at /etc/kafka/server.properties (rendered by cluster/lab/compose.py);
# the entrypoint formats its KRaft storage once (CLUSTER_ID) and runs the broker in the foreground.
FROM debian:bookworm-slim AS jars
RUN apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*
RUN apt-get update && apt-get install -y --no-install-recommends maven && rm -rf /var/lib/apt/lists/*
WORKDIR /build
COPY versions.env cluster/lab/pom.xml ./
ARG KAFKA_VERSION=
RUN release="$KAFKA_VERSION" && set -a && . ./versions.env && set +a && KAFKA_VERSION="${release:-$KAFKA_VERSION}" \
    && mvn -q -B -f pom.xml dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=/opt/kafka/libs \
       -Dkafka.version="$KAFKA_VERSION" -Dscala.binary.version="$SCALA_BINARY_VERSION" \
       -Dlog4j.version="$LOG4J_VERSION" -Djmx.exporter.version="$JMX_EXPORTER_VERSION" \
    && echo "$KAFKA_VERSION" > /opt/kafka/VERSION && rm -rf /root/.m2

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*
RUN useradd --system --uid 1000 --user-group --home-dir /var/lib/kafka --create-home kafka \
    && mkdir -p /var/lib/kafka/data /etc/kafka && chown kafka:kafka /var/lib/kafka/data
COPY --from=jars /opt/kafka /opt/kafka
COPY cluster/lab/templates/log4j2.properties /opt/kafka/config/log4j2.properties
COPY compose/kafka-entrypoint.sh /opt/kafka/entrypoint.sh
COPY compose/kafka-acls.sh /usr/local/bin/kafka-acls.sh
USER kafka
ENTRYPOINT ["/opt/kafka/entrypoint.sh"]
