"""The CEL seam: Kubernetes' quantity library over a real CEL implementation, and its one-line errors."""

from __future__ import annotations

import pytest

from kubectl_gpushare.kube import cel

pytestmark = pytest.mark.skipif(not cel.available(), reason=cel.INSTALL_HINT)

DEVICE = ("device",)


def _eval(source: str, **activation: object) -> object:
    return cel.compile_expression(source, tuple(sorted(activation)) or DEVICE).evaluate(activation)


def test_a_dra_selector_compares_capacity_by_value() -> None:
    device = {"driver": "gpu-mem.kubectl-gpushare.io", "capacity": {"gpu-mem.kubectl-gpushare.io": {
        "memory": cel.quantity("16Gi")}}}
    selector = ('device.driver == "gpu-mem.kubectl-gpushare.io" && device.capacity["gpu-mem.kubectl-gpushare.io"]'
                '.memory.compareTo(quantity("8Gi")) >= 0')
    assert cel.compile_expression(selector, DEVICE).evaluate_bool({"device": device}) is True
    assert _eval('quantity("1024Mi") == quantity("1Gi")', device={}) is True
    assert _eval('quantity("1500m").isGreaterThan(quantity("1"))', device={}) is True
    assert _eval('quantity("1").sub(quantity("2")).sign()', device={}) == -1
    assert _eval('quantity("2Ki").asInteger()', device={}) == 2048
    assert _eval('isQuantity("2Gi") && !isQuantity("two")', device={}) is True


def test_an_admission_policy_reads_the_request() -> None:
    source = 'object.spec.nodeName == request.userInfo.extra["authentication.kubernetes.io/node-name"][0]'
    compiled = cel.compile_expression(source, ("object", "request"))
    request = {"userInfo": {"extra": {"authentication.kubernetes.io/node-name": ["node-a"]}}}
    assert compiled.evaluate_bool({"object": {"spec": {"nodeName": "node-a"}}, "request": request}) is True
    assert compiled.evaluate_bool({"object": {"spec": {"nodeName": "node-b"}}, "request": request}) is False


@pytest.mark.parametrize(("source", "message"), [
    ("a +", "Syntax error"),
    ("nobody == 1", "undeclared reference to 'nobody'"),
    ("device.missing", "Key not found"),
    ('quantity("lots") == quantity("1")', "invalid quantity 'lots'"),
    ('quantity("8Ei").add(quantity("8Ei")).sign() == 1', "out of range"),
    ('quantity("1.5").asInteger() == 1', "not an integer"),
    ("1", "must evaluate to bool"),
    ("", "empty CEL expression"),
    ("true && " * 2000 + "true", "longer than 10240 characters"),
    ("device.driver == '\udcff'", "not valid UTF-8"),
    ("(" * 5000 + "true" + ")" * 5000, "recursion limit"),
])
def test_bad_expressions_fail_with_one_line(source: str, message: str) -> None:
    with pytest.raises(cel.CelError) as raised:
        cel.compile_expression(source, DEVICE).evaluate_bool({"device": {}})
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_values_cel_cannot_hold_are_an_error_not_a_crash() -> None:
    with pytest.raises(cel.CelError, match="out of range"):
        cel.compile_expression("device == 1", DEVICE).evaluate({"device": 2**70})


def test_version_attributes_compare_as_semantic_versions() -> None:
    device = {"attributes": {"gpu-mem.kubectl-gpushare.io": {"driverVersion": cel.semver("550.54.15")}}}
    check = 'cel.bind(a, device.attributes["gpu-mem.kubectl-gpushare.io"], {})'
    assert _eval(check.format('a.driverVersion.isGreaterThan(semver("535.0.0"))'), device=device) is True
    assert _eval(check.format("a.driverVersion.major() == 550 && a.driverVersion.minor() == 54"), device=device)
    assert _eval('semver("1.0.0-rc.1").compareTo(semver("1.0.0"))', device={}) == -1
    assert _eval('isSemver("1.2.3") && !isSemver("v1.2")', device={}) is True
    assert _eval(check.format("a.?missing.orValue(7) == 7"), device=device) is True
    with pytest.raises(cel.CelError, match="invalid semver"):
        _eval('semver("one") == semver("1.0.0")', device={})
