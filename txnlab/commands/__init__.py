"""The `txnlab` command's groups, one module each (cluster, operator, chaos, verify, docker, suites, and what they
share in common); txnlab/cli.py assembles them into one parser and dispatches."""
