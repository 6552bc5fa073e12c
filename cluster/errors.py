"""Which exceptions are the user's to fix (bad settings, missing install, cluster unreachable, an
administrative abort refused or failed).

The CLI prints these as one clear message with a non-zero exit; anything else is a bug and keeps
its traceback.
"""
from __future__ import annotations

import sys

USER_ERRORS = {  # module -> its exception class that is the user's to fix
    "cluster.abort": "AbortError", "cluster.connection": "ConnectionSettingsError", "cluster.java": "MissingInstall",
    "cluster.local": "ClusterError", "cluster.toxiproxy": "ToxiproxyError",
}


def loaded_errors(where: dict[str, str]) -> tuple[type[BaseException], ...]:
    """The named exception classes of the modules already imported. A module never imported raised
    nothing, and asking must not import one whose optional extra (pyproject.toml) is not installed."""
    loaded = {module: sys.modules.get(module) for module in where}
    return tuple(getattr(m, where[module]) for module, m in loaded.items() if m is not None)


def is_user_error(exc: BaseException, also: dict[str, str] | None = None) -> bool:
    """also: the same for the packages above cluster/ (which it cannot import), module -> class name."""
    builtin = (TimeoutError, FileNotFoundError, ValueError)
    return isinstance(exc, loaded_errors({**USER_ERRORS, **(also or {})}) + builtin)
