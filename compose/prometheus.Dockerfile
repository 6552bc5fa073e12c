# Prometheus for the compose stack: Debian's package (as scripts/setup.sh installs it for the local stack).
# The configuration and the alerting rules are mounted (docker-compose.yml).
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends prometheus && rm -rf /var/lib/apt/lists/*
USER nobody
WORKDIR /tmp
ENTRYPOINT ["/usr/bin/prometheus"]
