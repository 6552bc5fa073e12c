"""Experiments: validated specs (spec.py), the seeded schedule (schedule.py), steady-state probes
(probes.py), `txnlab chaos run` (experiment.py, always heals) and `txnlab chaos workload` (solo.py).
The top room of chaos/: it may import every other."""
