"""The static worst-case cost of DRA selectors: ordinary ones far below the limit, growing ones refused."""

from __future__ import annotations

import pytest
from costly_cel import NESTED_BIND, REPLACE_CHAIN, nested_bind

from kubectl_gpushare.kube import cel

pytestmark = pytest.mark.skipif(not cel.available(), reason=cel.INSTALL_HINT)

DRIVER = "gpu-mem.kubectl-gpushare.io"
ORDINARY = [
    f'device.driver == "{DRIVER}"',
    f'device.attributes["{DRIVER}"].model == "A100" && device.attributes["{DRIVER}"].index >= 1',
    f'device.capacity["{DRIVER}"].memory.compareTo(quantity("8Gi")) >= 0',
    f'device.attributes["{DRIVER}"].driverVersion.isGreaterThan(semver("1.2.3"))',
    f'cel.bind(gpu, device.attributes["{DRIVER}"], gpu.model == "T4" || gpu.model.startsWith("A"))',
    'device.attributes.exists(domain, device.attributes[domain].exists(name, name.matches("^m.*")))',
    f'device.attributes["{DRIVER}"].?uuid.orValue("").lowerAscii().contains("gpu-")',
    f'["T4", "A10"].exists(m, m == device.attributes["{DRIVER}"].model)',
    f'device.attributes["{DRIVER}"].model.replace("-", " ").split(" ").size() == 2',
]


def cost(source: str) -> int:
    from kubectl_gpushare.kube import cel_cost

    serialized = cel.compile_expression(source, ("device",)).serialized()
    return cel_cost.worst_case_cost(serialized, {"device": cel_cost.DEVICE})


@pytest.mark.parametrize("selector", ORDINARY)
def test_ordinary_selectors_cost_far_below_the_limit_and_compile(selector: str) -> None:
    assert 0 < cost(selector) < 10_000
    assert cel.compile_selector(selector).source == selector


@pytest.mark.parametrize("selector", [NESTED_BIND, REPLACE_CHAIN], ids=["nested-bind", "replace-chain"])
def test_a_selector_that_grows_without_bound_is_refused_with_upstreams_detail(selector: str) -> None:
    with pytest.raises(cel.CelCostError) as refused:
        cel.compile_selector(selector)
    assert refused.value.detail == "too complex, exceeds cost limit"
    assert "> 1000000" in str(refused.value) and "\n" not in str(refused.value)
    # Still an ordinary expression to CEL: only the bound refuses it.
    assert cel.compile_expression(selector, ("device",)).source == selector


def test_each_bind_level_multiplies_the_cost_by_the_copies_it_concatenates() -> None:
    costs = [cost(nested_bind(levels)) for levels in (3, 4, 5)]
    assert costs[1] > 7 * costs[0] and costs[2] > 7 * costs[1]
    assert cost(nested_bind(6)) < 1_000_000 < cost(nested_bind(7))


def test_a_comprehension_multiplies_its_step_by_the_declared_map_size() -> None:
    inner = cost(f'device.attributes["{DRIVER}"].exists(n, n.size() > 3)')
    nested = cost('device.attributes.exists(d, device.attributes[d].exists(n, n.size() > 3))')
    assert nested > 32 * (inner - 10)


def test_an_undeclared_field_is_unbounded_where_its_size_matters() -> None:
    assert cost("device.driver + device.driver == device.driver") < 100
    assert cost("device.nothing + device.nothing == device.driver") > 1_000_000
    assert cost("device.nothing == 1") < 10  # its size does not matter to a comparison with a scalar
