"""The ground floor: how to reach a Kafka cluster, and how to run and control the local one.

Owns: the one connection-settings builder (bootstrap, SASL, TLS), the pinned versions, the local
launcher (Kafka KRaft nodes, Toxiproxy, Prometheus as plain processes), node control and cluster
introspection (coordinators, leaders, the active controller).
Must not import from exporter/, chaos/, spark_analysis/, report/ or txnlab/.
"""
