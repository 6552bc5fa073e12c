"""The exporter's access layer by request family, behind one facade (exporter/kafka_access.py's KafkaAccess):
results.py (what every request returns), lanes.py (the admin clients and their lanes), metadata.py (cluster
metadata and its cache), partitions.py (per-partition leader requests: offsets, producer state),
transactions.py (coordinators), groups.py (consumer-group offsets), settings.py (broker configs, finalized
features), fetches.py (readable lag). Only the facade imports this room; it imports nothing of the exporter
but readable_lag.py."""
