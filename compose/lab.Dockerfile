# `txnlab verify` as a service of docker-compose.yml: PySpark (local[*], or --master spark://...) with
# Spark's Kafka connector. Run on demand:  docker compose run --rm verify /runs/<run dir> [--json]
# Stage 1 resolves the connector from Maven Central exactly as scripts/setup.sh does (spark_analysis/pom.xml).
FROM maven:3.9-eclipse-temurin-17 AS connector
WORKDIR /build
COPY versions.env spark_analysis/pom.xml ./
RUN set -a && . ./versions.env && mvn -q -B -f pom.xml dependency:copy-dependencies -DincludeScope=runtime \
      -DoutputDirectory=/jars -Dspark.kafka.version="$SPARK_KAFKA_VERSION" \
      -Dspark.token.version="$SPARK_TOKEN_PROVIDER_VERSION" -Dscala.binary.version="$SCALA_BINARY_VERSION"

FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/txnlab
ENV TXNLAB_HOME=/opt/txnlab/.txnlab
COPY pyproject.toml versions.env README.md ./
COPY txnlab txnlab
COPY cluster cluster
COPY exporter exporter
COPY chaos chaos
COPY spark_analysis spark_analysis
COPY report report
COPY dashboards dashboards
RUN pip install --no-cache-dir ".[verify]" && rm -rf /root/.cache
COPY --from=connector /jars /tmp/jars
RUN set -a && . ./versions.env && mkdir -p "$TXNLAB_HOME/dist" \
    && mv /tmp/jars "$TXNLAB_HOME/dist/spark-kafka-$SPARK_KAFKA_VERSION"
ENTRYPOINT ["txnlab", "verify"]
