"""The ground floor, in two rooms whose imports only point down (tests/unit/test_layering.py):

    lab      the lab that runs local clusters and their companions: the pinned versions and installs, the local
             KRaft launcher and its layout, the process supervisor, Toxiproxy, Prometheus, the secured cluster's
             secrets, the compose stack and the Docker engine, the clients' and Flink's installs, Spark's layout
    access   how to reach and ask a Kafka cluster, any cluster: the one connection-settings builder (bootstrap,
             SASL, TLS), admin requests and introspection (coordinators, leaders, producer state), reads of both
             isolation levels, the guarded abort, diagnosis of failures, waiting, the errors

The exporter needs only access (its core install has none of the lab's dependencies); chaos/, spark_analysis/,
report/ and txnlab/ use both. Must not import from exporter/, chaos/, spark_analysis/, report/ or txnlab/.
"""
