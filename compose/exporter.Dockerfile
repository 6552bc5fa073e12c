# The txnlab exporter image for docker-compose.yml (`docker compose build exporter`). Slim: the core
# dependencies only (no extra: no PySpark, matplotlib, Grafana SDK or confluent-kafka); the sources of
# every package are copied (a few hundred kB) so `txnlab txn ...` works in the image too.
FROM python:3.11-slim
WORKDIR /opt/txnlab
COPY pyproject.toml versions.env README.md ./
COPY txnlab txnlab
COPY cluster cluster
COPY exporter exporter
COPY chaos chaos
COPY spark_analysis spark_analysis
COPY report report
COPY dashboards dashboards
RUN pip install --no-cache-dir . && rm -rf /root/.cache
USER nobody
ENTRYPOINT ["python", "-m", "exporter"]
