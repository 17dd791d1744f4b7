from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from kubectl_gpushare.deviceplugin.command import parse_xids, serve_device_plugin_command


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", set()), (",", set()), ("48", {48}), ("48, 79,", {48, 79}), (" 13 ,13", {13})],
    ids=["empty", "comma", "one", "trailing-comma", "duplicates"],
)
def test_parse_xids_reads_comma_lists(text: str, expected: set[int]) -> None:
    assert parse_xids(text) == expected


@pytest.mark.parametrize("text", ["not-an-int", "-68", "1.5", "68;79"])
def test_parse_xids_rejects_junk(text: str) -> None:
    with pytest.raises(click.BadParameter, match="not an Xid"):
        parse_xids(text)


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        ([], 2, "--node-name (or NODE_NAME) is required"),
        (["--node-name", "n", "--fake-gpus", "4x80TiB"], 2, "invalid --fake-gpus group '4x80TiB'"),
        (["--node-name", "n", "--fake-gpus", "8x80GiB", "--memory-unit", "MiB"], 2, "--unit-size 10 or more"),
        (["--node-name", "n", "--ignore-xids", "x"], 2, "'x' is not an Xid number"),
        (["--node-name", "n", "--memory-unit", "KiB"], 2, "'KiB' is not one of"),
        (["--node-name", "n", "--usage-interval", "nan"], 2, "'nan' is not a finite number"),
        (["--node-name", "n1,metadata.name!=x"], 2, "'n1,metadata.name!=x' is not a node name"),
        (["--node-name", "x" * 5000], 2, "is not a node name"),
    ],
    ids=["no-node", "bad-fake-spec", "too-many-devices", "bad-xids", "bad-unit", "nan-interval", "selector-node",
         "long-node"],
)
def test_bad_configuration_exits_2_with_one_clear_line(args: list[str], code: int, message: str) -> None:
    runner = CliRunner(env={"NODE_NAME": None, "GPUSHARE_FAKE_GPUS": None})
    result = runner.invoke(serve_device_plugin_command, args)
    assert result.exit_code == code, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_without_a_driver_nvml_failure_exits_5_or_advertises_nothing() -> None:
    runner = CliRunner(env={"NODE_NAME": "n", "GPUSHARE_FAKE_GPUS": None, "KUBECONFIG": "/nonexistent"})
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        pass
    else:
        pytest.skip("a GPU driver is present")
    result = runner.invoke(serve_device_plugin_command, [])
    assert result.exit_code == 5
    assert "cannot initialise NVML" in result.output and "--fake-gpus" in result.output
