"""Which exceptions are the user's to fix (bad settings, missing install, cluster unreachable).

The CLI prints these as one clear message with a non-zero exit; anything else is a bug and keeps
its traceback.
"""
from __future__ import annotations


def is_user_error(exc: BaseException) -> bool:
    from cluster.connection import ConnectionSettingsError
    from cluster.java import MissingInstall
    from cluster.local import ClusterError
    from cluster.toxiproxy import ToxiproxyError
    return isinstance(exc, (ConnectionSettingsError, MissingInstall, ClusterError, ToxiproxyError,
                            TimeoutError, FileNotFoundError, ValueError))
