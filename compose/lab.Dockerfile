# The lab: txnlab with its workloads and `txnlab verify` (PySpark, local[*] or --master spark://..., with Spark's
# Kafka connector), on Debian's Python and JRE. docker-compose.yml runs it as the verify profile's Spark master,
# workers and `verify` service:  docker compose --profile verify run --rm verify /runs/<run dir> [--json]
# Stage 1 resolves the connector from Maven Central exactly as scripts/setup.sh does (spark_analysis/pom.xml).
FROM debian:bookworm-slim AS connector
RUN apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*
RUN apt-get update && apt-get install -y --no-install-recommends maven && rm -rf /var/lib/apt/lists/*
WORKDIR /build
COPY versions.env spark_analysis/pom.xml ./
RUN set -a && . ./versions.env && mvn -q -B -f pom.xml dependency:copy-dependencies -DincludeScope=runtime \
      -DoutputDirectory=/jars -Dspark.kafka.version="$SPARK_KAFKA_VERSION" \
      -Dspark.token.version="$SPARK_TOKEN_PROVIDER_VERSION" -Dscala.binary.version="$SCALA_BINARY_VERSION" \
    && rm -rf /root/.m2

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates python3 python3-venv procps \
    && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/venv
# pip trusts the system's certificate authorities (the base's), not only its own bundle
ENV PATH=/opt/venv/bin:$PATH PIP_CERT=/etc/ssl/certs/ca-certificates.crt TXNLAB_HOME=/opt/txnlab/.txnlab
WORKDIR /opt/txnlab
COPY pyproject.toml versions.env README.md ./
COPY txnlab txnlab
COPY cluster cluster
COPY exporter exporter
COPY chaos chaos
COPY spark_analysis spark_analysis
COPY report report
COPY dashboards dashboards
# editable: the sources stay here beside versions.env, which txnlab reads its pins from
RUN pip install --no-cache-dir -e ".[verify,report]" && rm -rf /root/.cache
COPY --from=connector /jars /tmp/jars
RUN set -a && . ./versions.env && mkdir -p "$TXNLAB_HOME/dist" \
    && mv /tmp/jars "$TXNLAB_HOME/dist/spark-kafka-$SPARK_KAFKA_VERSION"
ENTRYPOINT ["txnlab", "verify"]
