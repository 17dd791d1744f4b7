"""Quantities are stored as kube-apiserver's canonical strings (what ``Quantity.String()`` prints)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_gpushare import protocol


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("1", "1"),
        ("14", "14"),
        ("1000", "1k"),
        ("1500", "1500"),
        ("1.5k", "1500"),
        ("0.5", "500m"),
        ("1.5", "1500m"),
        ("1000m", "1"),
        ("+5", "5"),
        ("-1000", "-1k"),
        ("0.000", "0"),
        ("2048Mi", "2Gi"),
        ("1536Ki", "1536Ki"),
        ("0.5Gi", "512Mi"),
        ("1.5Ki", "1536"),
        ("1e3", "1e3"),
        ("12e2", "1200"),
        ("0.0000000001", "1n"),
        ("10G", "10G"),
    ],
)
def test_canonical_strings_match_kube_apiserver(text: str, canonical: str) -> None:
    assert protocol.canonical_quantity(text) == canonical


def test_a_lone_capital_e_is_exa_not_an_exponent() -> None:
    # Hypothesis found it: 25000000000000000k is 25E, and 25E must read back (as exa, not as e<n>).
    assert protocol.canonical_quantity("25000000000000000k") == "25E"
    assert protocol.canonical_quantity("25E") == "25E"
    assert protocol.canonical_quantity("2E") == "2E" and protocol.canonical_quantity("2e3") == "2e3"


@pytest.mark.parametrize("text", ["", "abc", "1x", "Gi", "1.2.3", "1e99999999999", "9" * 65])
def test_non_quantities_are_refused_with_the_servers_words(text: str) -> None:
    with pytest.raises(ValueError, match="quantities must match the regular expression"):
        protocol.canonical_quantity(text)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=2**62), st.sampled_from(["", "k", "M", "Ki", "Mi", "Gi", "m"]))
def test_canonical_form_keeps_the_value_and_is_a_fixed_point(number: int, suffix: str) -> None:
    text = f"{number}{suffix}"
    canonical = protocol.canonical_quantity(text)
    assert protocol.canonical_quantity(canonical) == canonical
    if suffix != "m" or number % 1000 == 0:
        try:
            expected = protocol.parse_quantity(text)
        except ValueError:
            return
        assert protocol.parse_quantity(canonical) == expected
