"""chaos/: workloads, faults, experiments and the bug catalog, in five rooms whose imports only point down
(tests/unit/test_layering.py):

    catalog    the bug catalog: chaos/bugs/<id>.yaml's model, loading, each side's experiment, matching a run's
               anomalies, stalls and history shapes to the bugs that name them
    runner     experiments: specs, schedules, probes, `txnlab chaos run` and `txnlab chaos workload`
    nemesis    the faults, their heals and journal, the backends they act through, fault tools of their own
    workloads  the workload processes of every client, their plans, and the run that hosts them
    record     what a run writes and reads back: the history, its columnar twin, record ids, fault windows,
               recovery

experiments/ and bugs/ are data (YAML), read by runner/spec.py and catalog/bugs.py.
"""
