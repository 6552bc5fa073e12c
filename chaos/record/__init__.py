"""The run's record: the history (history.py) and its Parquet twin (columnar.py), the record id scheme
(ids.py), and what is read back from a history (annotations.py: fault windows; recovery.py: when each
process committed again). Imports nothing else of chaos/."""
