"""kube.safe_yaml: PyYAML's safe loader, every tagged value it cannot build a ValueError."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_gpushare.kube import safe_yaml


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("!!bool x", "tag:yaml.org,2002:bool value 'x' is not valid"),  # yaml.safe_load: KeyError
        ("a: !!int", "tag:yaml.org,2002:int value '' is not valid"),  # IndexError
        ("[!!float ]", "tag:yaml.org,2002:float value '' is not valid"),  # IndexError
        ("!!bool \"\\e[2J\"", "tag:yaml.org,2002:bool value '[2J' is not valid"),  # printable, cut to 64
        ("!!int x", "invalid literal for int() with base 10: 'x'"),  # ValueError as PyYAML raises it
        ("!!timestamp 2024-13-01", "month must be in 1..12"),
        ("!!timestamp x", "tag:yaml.org,2002:timestamp value 'x' is not valid"),  # AttributeError: no match
        # int() refuses past 4,300 decimal digits in words meant for a programmer (sys.set_int_max_str_digits)
        ("a: " + "9" * 5000, "integer too large (5,000 digits)"),
        ("[-1_" + "0" * 4300 + "]", "integer too large (4,301 digits)"),
        ("!!int " + "7" * 4301, "integer too large (4,301 digits)"),
    ],
)
def test_a_tagged_value_python_cannot_build_is_a_value_error(text: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        safe_yaml.load(text)
    assert str(caught.value) == message


def test_an_integer_is_read_up_to_the_digits_its_decimal_text_may_have() -> None:
    assert safe_yaml.load("- " + "9" * 4300 + "\n- 0x" + "f" * 3500 + "\n- 0" + "7" * 4700) == [
        int("9" * 4300), int("f" * 3500, 16), int("7" * 4700, 8)]  # 4,215 and 4,236 decimal digits


@pytest.mark.parametrize("text", ["0x" + "f" * 5000, "0" + "7" * 5000, "0b1" + "0" * 14_285, "1" + ":00" * 6000])
def test_a_non_decimal_integer_past_the_decimal_limit_is_too_large(text: str) -> None:
    """int() reads other bases however long, but no JSON body or text could hold the value afterwards."""
    with pytest.raises(ValueError, match=r"^integer too large \(more than 4,300 digits\)$"):
        safe_yaml.load("a: " + text)


def test_what_is_not_yaml_stays_a_yaml_error() -> None:
    with pytest.raises(yaml.YAMLError):
        safe_yaml.load("a: [b")
    with pytest.raises(yaml.YAMLError):
        safe_yaml.load("!!python/object:os.system x")


_PIECES = st.sampled_from(["!!int", "!!bool", "!!float", "!!timestamp", "!!str", "!!null", " ", "\n", "- ", "a: ",
                           "[", "]", "{", "}", ",", "x", "1", "-", "''", "~", "yes", "0x1f", "2024-01-01", "&a ",
                           "*a", "#"])


@settings(max_examples=400)
@given(st.lists(_PIECES, max_size=12).map("".join))
def test_it_reads_what_safe_load_reads_and_raises_only_documented_errors(text: str) -> None:
    try:
        expected: object = yaml.safe_load(text)
    except (AttributeError, KeyError, IndexError, ValueError, yaml.YAMLError) as exc:
        expected = exc
    try:
        assert safe_yaml.load(text) == expected
    except (ValueError, yaml.YAMLError) as exc:
        assert isinstance(expected, Exception), f"safe_load read {text!r} as {expected!r}"
        assert type(exc) is type(expected) or isinstance(expected, (AttributeError, KeyError, IndexError)), (
            exc, expected)


def _laughs(levels: int) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "\n".join(lines)


def test_aliases_that_expand_past_the_bound_are_refused_before_anyone_serializes_them() -> None:
    # Nine aliases a level, seven levels: 54 million nodes once written out ("billion laughs").
    with pytest.raises(ValueError, match="excessive aliasing"):
        safe_yaml.load(_laughs(7))
    assert safe_yaml.load(_laughs(4))["a4"][0][0][0][0][0] == "x"  # 66,000 nodes from 50: under the bound
