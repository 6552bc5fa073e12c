"""Java's String.hashCode and the __transaction_state partition rule."""
from __future__ import annotations

import pytest

from cluster.admin import java_string_hash, transaction_state_partition


@pytest.mark.parametrize("text,expected", [
    ("", 0), ("a", 97), ("abc", 96354), ("hello world", 1794106052),
    ("polygenelubricants", -2147483648), ("é", 233), ("😀", 1772899),
])
def test_java_string_hash(text, expected):
    assert java_string_hash(text) == expected


def test_partition_rule_handles_negative_and_min_value_hashes():
    assert transaction_state_partition("polygenelubricants", 50) == 0   # Utils.abs(MIN_VALUE) == 0
    assert transaction_state_partition("abc", 50) == 96354 % 50
    negative = next(s for s in (f"id-{i}" for i in range(1000)) if java_string_hash(s) < 0)
    assert transaction_state_partition(negative, 50) == abs(java_string_hash(negative)) % 50
