"""The faults: the catalog of kinds (fault_kinds.py), each fault and its heal (faults.py), the backends they
act through (backends.py), the journal `txnlab chaos heal` reads (journal.py), and the fault tools of their
own (inject_hanging.py, producer_flood.py, _raw_produce.py, request_hold.py). Imports record/ and
workloads/ (a fault may pause, kill or start a run's workload process), never runner/."""
