"""Pod cgroup paths for both kubelet cgroup drivers and every QoS class; hostile UIDs never reach a path."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubectl_gpushare.node import cgroups

UID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"


@pytest.mark.parametrize(
    ("driver", "qos", "expected"),
    [
        ("systemd", "guaranteed", "kubepods.slice/kubepods-pod0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0.slice"),
        ("systemd", "burstable", "kubepods.slice/kubepods-burstable.slice/"
                                 "kubepods-burstable-pod0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0.slice"),
        ("systemd", "besteffort", "kubepods.slice/kubepods-besteffort.slice/"
                                  "kubepods-besteffort-pod0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0.slice"),
        ("cgroupfs", "guaranteed", f"kubepods/pod{UID}"),
        ("cgroupfs", "burstable", f"kubepods/burstable/pod{UID}"),
        ("cgroupfs", "besteffort", f"kubepods/besteffort/pod{UID}"),
    ],
)
def test_pod_path_follows_kubelet(driver: cgroups.Driver, qos: str, expected: str, tmp_path: Path) -> None:
    assert cgroups.pod_path(UID, qos, driver) == expected
    assert cgroups.uid_of_dir(expected.rsplit("/", 1)[1]) == UID
    layout = cgroups.Layout(root=str(tmp_path), nvml_root="/sys/fs/cgroup")
    (tmp_path / expected).mkdir(parents=True)
    (tmp_path / "cgroup.controllers").write_text("cpu memory\n")
    assert layout.detect() == driver
    assert layout.find(UID, driver) == (f"{tmp_path}/{expected}", f"/sys/fs/cgroup/{expected}")
    assert layout.pods(driver) == {UID: f"/sys/fs/cgroup/{expected}"}


@pytest.mark.parametrize(
    "uid",
    ["../../etc", "0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0", f"{UID}/..", f"{UID}\n", "", "a" * 10_000,
     f"../{UID[3:]}", UID.replace("-", "_"), f"{UID}.slice"],
)
def test_hostile_uid_never_becomes_a_path(uid: str, tmp_path: Path) -> None:
    layout = cgroups.Layout(root=str(tmp_path), nvml_root=str(tmp_path))
    with pytest.raises(cgroups.InvalidUidError):
        cgroups.pod_path(uid, "burstable", "cgroupfs")
    with pytest.raises(cgroups.InvalidUidError):
        layout.find(uid, "systemd")


def test_proc_cgroup_maps_to_pod() -> None:
    text = f"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID.replace('-', '_')}.slice/cri-x\n"
    assert cgroups.uid_of_proc_cgroup(text) == UID
    assert cgroups.uid_of_proc_cgroup(f"0::/kubepods/pod{UID}/abc\n") == UID
    assert cgroups.uid_of_proc_cgroup("0::/system.slice/sshd.service\n") is None
    # a directory merely named like a pod elsewhere in the path still names a UUID only
    assert cgroups.uid_of_proc_cgroup("0::/pod../../x\n") is None
