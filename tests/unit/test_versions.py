"""versions.env parsing: the one place versions are pinned."""
from __future__ import annotations

import pytest

from cluster.versions import parse_env_file, pinned


def test_repository_pins():
    pins = pinned()
    assert pins["KAFKA_VERSION"] == "4.3.1"
    assert pins["TOXIPROXY_VERSION"].startswith("v2.12.")


def test_parse_ignores_comments_and_rejects_garbage():
    assert parse_env_file("# c\n\nA=1\nB = x y\n") == {"A": "1", "B": "x y"}
    with pytest.raises(ValueError, match="line 2"):
        parse_env_file("A=1\nnot a pair\n")
