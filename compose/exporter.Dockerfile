# The txnlab exporter image for docker-compose.yml (`docker compose build exporter`). Slim: the core
# dependencies only (no extra: no PySpark, matplotlib, Grafana SDK or confluent-kafka), on Debian's Python; the
# sources of every package are copied (a few hundred kB) so `txnlab txn ...` works in the image too.
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates python3 python3-venv && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/venv
# pip trusts the system's certificate authorities (the base's), not only its own bundle
ENV PATH=/opt/venv/bin:$PATH PIP_CERT=/etc/ssl/certs/ca-certificates.crt
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
