"""`Progress`: how a long-running step reports what it does, one line at a time (`print` by default).

Owns: the one definition of the type, used by the launcher, runs, experiments and the demo.
Must not: print or log anything itself.
"""
from __future__ import annotations

from typing import Callable

Progress = Callable[[str], None]
