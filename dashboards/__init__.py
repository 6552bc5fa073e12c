"""Grafana dashboards and Prometheus alerting rules for transactional Kafka, as code (see build.py)."""
