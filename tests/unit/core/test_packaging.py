"""What each install brings: the plugin's lean dependency set, the daemons' extra, and the image."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def requirements(text: str) -> set[str]:
    return {re.split(r"[<>=!~ ]", line.strip())[0].lower() for line in text.splitlines() if line.strip()}


def test_plain_install_is_the_plugin_set_and_the_daemons_come_with_the_extra() -> None:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    assert requirements(cfg["options"]["install_requires"]) == {"click", "msgspec", "pyyaml", "rich"}
    assert requirements(cfg["options.extras_require"]["daemons"]) == {
        "grpcio", "protobuf", "nvidia-ml-py", "prometheus-client", "kubernetes", "cel-expr-python"}
    assert "tabulate" not in (ROOT / "setup.cfg").read_text()
    assert "'.[test,dev,daemons]'" in (ROOT / ".ci" / "run").read_text()


def test_image_builds_on_a_pinned_base_with_the_daemons_extra_as_a_non_root_user() -> None:
    text = (ROOT / "Dockerfile").read_text()
    (base,) = re.findall(r"^ARG PYTHON_IMAGE=(\S+)$", text, re.MULTILINE)
    assert re.fullmatch(r"python:\d+\.\d+\.\d+-slim-\w+(@sha256:[0-9a-f]{64})?", base)
    assert re.findall(r"^FROM (\S+)", text, re.MULTILINE) == ["${PYTHON_IMAGE}", "${PYTHON_IMAGE}"]
    assert "'kubectl-gpushare[daemons]'" in text and "'.[daemons]'" in text
    assert re.findall(r"^USER (\S+)$", text, re.MULTILINE) == ["65532:65532"]


def test_krew_launcher_installs_the_bare_wheel_without_extras() -> None:
    text = (ROOT / "plugin" / "launcher.sh").read_text()
    (install,) = [line for line in text.splitlines() if "pip install" in line and not line.lstrip().startswith("#")]
    assert install.rstrip().endswith('"$here"/kubectl_gpushare-*.whl') and "[" not in install


def test_install_guide_keeps_nvidia_and_gpushare_device_plugins_apart() -> None:
    import yaml

    text = (ROOT / "manifests" / "README.md").read_text()
    snippets = [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", text, re.DOTALL)]
    snippets = [s for s in snippets if s.get("kind") != "Kustomization"]  # the DRA overlay: test_manifest.py
    terms = [s["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
             ["nodeSelectorTerms"] for s in snippets]
    assert terms == [[{"matchExpressions": [{"key": "gpushare", "operator": "NotIn", "values": ["true"]}]}],
                     [{"matchExpressions": [{"key": "gpushare", "operator": "In", "values": ["true"]}]}]]
    daemonset = next(d for d in yaml.safe_load_all((ROOT / "manifests" / "base" / "device-plugin.yaml").read_text())
                     if d["kind"] == "DaemonSet")
    assert daemonset["spec"]["template"]["spec"]["nodeSelector"] == {"gpushare": "true"}
    scheduler = yaml.safe_load((ROOT / "manifests" / "kube-scheduler-config.yaml").read_text())
    assert f"`\"urlPrefix\": \"{scheduler['extenders'][0]['urlPrefix']}\"`" in text


def test_package_data_ships_every_file_of_the_manifest_trees() -> None:
    # `kubectl gpushare manifests` builds the trees from the installed package (cli/_manifests -> manifests/):
    # a folder the globs miss is absent from the wheel, and the command then fails where the repository passes.
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    globs = [g.strip() for g in cfg["options.package_data"]["kubectl_gpushare.cli._manifests"].split(",")]
    root = ROOT / "manifests"
    shipped = {path for pattern in globs for path in root.glob(pattern)}
    assert shipped == set(root.rglob("*.yaml"))


def test_every_manifests_path_the_docs_name_exists_and_the_moved_viewer_role_is_named_as_former() -> None:
    # A user of an earlier release finds where the role's file went, and no doc points at a path that is gone.
    formers: set[str] = set()
    for doc in [ROOT / "README.md", ROOT / "manifests" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = doc.read_text()
        former = set(re.findall(r"Earlier releases shipped it as `(manifests/[^`]+)`", text))
        formers |= former
        for path in re.findall(r"(?<![\w/.-])(?:\.\./)?(manifests/[\w./-]*\w)", text):
            assert (ROOT / path).exists() or path in former, (doc.name, path)
    assert formers == {"manifests/base/viewer.yaml"}
    assert not (ROOT / "manifests" / "base" / "viewer.yaml").exists()
    assert (ROOT / "manifests" / "viewer" / "viewer.yaml").exists()
