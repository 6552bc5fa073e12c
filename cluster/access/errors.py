"""The one base of the errors the user can fix (bad settings or spec, missing install, cluster unreachable,
an administrative abort refused or failed, a wait that timed out).

Owns: `TxnlabError`. Every user-fixable error class of txnlab derives from it (keeping its second,
built-in base, e.g. `class SpecError(TxnlabError, ValueError)`); the CLI (txnlab/cli.py main) catches it
only, prints its message on one line and exits 2. Any other exception is a bug and keeps its traceback.
Must not: import anything of txnlab's (every package may import this).
"""
from __future__ import annotations


class TxnlabError(Exception):
    """An error the user can fix: the CLI prints its message and exits 2."""
