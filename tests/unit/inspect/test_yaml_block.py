"""`yaml_block` writes exactly PyYAML's bytes, or declines (None) and PyYAML writes the document."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_gpushare.inspect import yaml_block
from kubectl_gpushare.inspect.report import to_yaml
from kubectl_gpushare.inspect.tenants import Quota, Tenant, TenantReport, TenantTotal


def pyyaml(data: Any) -> str:
    text: str = yaml.dump(data, Dumper=yaml.CSafeDumper, sort_keys=False, default_flow_style=False)
    return text


NAMES = st.sampled_from(["", "a", "n-1", "10.0.0.1", "123", "007", "1.5", "true", "yes", "no", "off", "null", "~",
                         "2020-01-01", "1_000", "0x1f", "1:20", ".inf", "a b", "a: b", "-x", "é", "x\ny", "'q'",
                         "#c", "a" * 130, "a " * 60, "default/job-c", "e1", "1e5", "Running"])
SCALARS = st.one_of(NAMES, st.text(max_size=12), st.integers(-(2**63), 2**63), st.booleans(), st.none())
KEYS = st.one_of(st.sampled_from(["name", "gpus", "usedPercent", "apiVersion", "true", "1", "a b", ""]),
                 st.text(max_size=6))
DATA = st.recursive(SCALARS, lambda children: st.one_of(st.lists(children, max_size=4),
                                                         st.dictionaries(KEYS, children, max_size=4)),
                    max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(KEYS, DATA, max_size=5))
def test_written_bytes_equal_pyyaml_or_it_declines(data: dict[str, Any]) -> None:
    written = yaml_block.dump(data)
    if written is not None:
        assert written == pyyaml(data)
        assert yaml.safe_load(written) == data


NAMEISH = st.one_of(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,20}", fullmatch=True), NAMES)
NAME_DATA = st.recursive(
    st.one_of(NAMEISH, st.integers(-(2**40), 2**40), st.booleans()),
    lambda children: st.one_of(st.lists(children, max_size=4),
                               st.dictionaries(st.from_regex(r"[a-z][A-Za-z]{0,8}", fullmatch=True), children,
                                               max_size=4)),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["nodes", "cluster", "unit", "kind"]), NAME_DATA, min_size=1))
def test_report_like_data_is_written_as_pyyaml_writes_it(data: dict[str, Any]) -> None:
    written = yaml_block.dump(data)
    if written is not None:  # declined only for empty lists or mappings inside a list
        assert written == pyyaml(data)


def test_report_shapes_are_written_directly_and_round_trip() -> None:
    report = TenantReport("gpushare.kubectl-gpushare.io/v1", "GPUShareTenants", "GiB",
                          [Tenant("ml", 1, 1, 12, 0, Quota("12", "20")), Tenant("2020-01-01", 0, 0, 0, 3)],
                          TenantTotal(1, 1, 12, 3))
    import msgspec

    data = msgspec.to_builtins(report)
    written = yaml_block.dump(data)
    assert written is not None and written == pyyaml(data)
    assert "used: '12'" in written and "name: '2020-01-01'" in written


def test_a_name_needing_more_quoting_falls_back_to_pyyaml() -> None:
    report = TenantReport("v1", "GPUShareTenants", "GiB", [Tenant("a b: #c\u00e9", 0, 0, 0, 0)],
                          TenantTotal(0, 0, 0, 0))
    import msgspec

    data = msgspec.to_builtins(report)
    assert yaml_block.dump(data) is None
    assert to_yaml(report) == pyyaml(data)
