"""How to reach and ask a Kafka cluster (cluster/__init__.py): the room the exporter, chaos/ and spark_analysis/
use; it imports nothing of the lab."""
