"""The lab that runs local clusters and their companions (cluster/__init__.py): only the lab uses it (chaos/,
spark_analysis/, report/, txnlab/), never the exporter; it may use cluster/access/."""
