"""The one `txnlab` command: argument parsing and dispatch only."""
__version__ = "0.1.0"
