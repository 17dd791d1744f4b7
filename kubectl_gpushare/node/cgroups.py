"""Where kubelet puts a pod's cgroup (cgroup v2), for both cgroup drivers and every QoS class.

Pure path arithmetic plus `stat`: nothing here writes. A pod UID from the API server is hostile
input; it must match `UID_PATTERN` (a lower-case RFC 4122 UUID, what the API server generates)
before it becomes part of a path, so no UID can name anything outside the cgroup root.

Layout, from kubelet's source (kubernetes/kubernetes, pkg/kubelet/cm):

- ``pod_container_manager_linux.go``: a pod's cgroup is ``podCgroupNamePrefix`` ("pod") + UID under
  its QoS cgroup; ``qos_container_manager_linux.go``: Guaranteed pods sit directly under the
  ``kubepods`` root, Burstable and BestEffort under ``kubepods/burstable`` and ``kubepods/besteffort``.
- ``cgroup_manager_linux.go``: the cgroupfs driver joins the names as directories
  (``kubepods/burstable/pod<uid>``); the systemd driver turns each level into a slice named after
  all its ancestors (``kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice``)
  with ``-`` in a name escaped to ``_`` (``escapeSystemdCgroupName``), so the UID's dashes become
  underscores.

With kubelet's ``--cgroup-root`` other than ``/``, the whole tree moves under that cgroup: pass the
directory that holds ``kubepods`` / ``kubepods.slice`` as the root.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Final, Literal

Driver = Literal["systemd", "cgroupfs"]
DRIVERS: Final = ("systemd", "cgroupfs")
QOS_CLASSES: Final = ("guaranteed", "burstable", "besteffort")
"""Kubernetes QoS classes; ``""`` in paths below means Guaranteed (no QoS level of its own)."""
DEFAULT_ROOT: Final = "/sys/fs/cgroup"
"""Where cgroup v2 is mounted; NVIDIA requires it there for memory partitioning."""
KUBEPODS: Final = "kubepods"

UID_PATTERN: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_SYSTEMD_POD: Final = re.compile(
    r"kubepods(?:-(?:burstable|besteffort))?-pod([0-9a-f]{8}_[0-9a-f]{4}_[0-9a-f]{4}_[0-9a-f]{4}_[0-9a-f]{12})\.slice"
)
_CGROUPFS_POD: Final = re.compile(r"pod([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})")


class InvalidUidError(ValueError):
    """A pod UID that is not a UUID; it is never turned into a path."""


def valid_uid(uid: str) -> bool:
    """Whether ``uid`` is exactly a lower-case UUID (what the API server assigns)."""
    return UID_PATTERN.fullmatch(uid) is not None


def qos_dirs(driver: Driver) -> dict[str, str]:
    """QoS class -> the directory (relative to the root) that holds its pods' cgroups."""
    if driver == "systemd":
        return {
            "guaranteed": "kubepods.slice",
            "burstable": "kubepods.slice/kubepods-burstable.slice",
            "besteffort": "kubepods.slice/kubepods-besteffort.slice",
        }
    return {"guaranteed": KUBEPODS, "burstable": f"{KUBEPODS}/burstable", "besteffort": f"{KUBEPODS}/besteffort"}


def pod_dir_name(uid: str, qos: str, driver: Driver) -> str:
    """The pod cgroup's own directory name.

    Raises:
        InvalidUidError: ``uid`` is not a UUID; ValueError: unknown QoS class.
    """
    if not valid_uid(uid):
        raise InvalidUidError(f"pod UID {uid[:64]!r} is not a UUID")
    if qos not in QOS_CLASSES:
        raise ValueError(f"unknown QoS class {qos[:32]!r}")
    if driver == "systemd":
        level = "kubepods" if qos == "guaranteed" else f"kubepods-{qos}"
        return f"{level}-pod{uid.replace('-', '_')}.slice"
    return f"pod{uid}"


def pod_path(uid: str, qos: str, driver: Driver) -> str:
    """The pod's cgroup relative to the root, e.g. ``kubepods/burstable/pod<uid>``.

    Raises:
        InvalidUidError, ValueError: as `pod_dir_name`.
    """
    return f"{qos_dirs(driver)[qos]}/{pod_dir_name(uid, qos, driver)}"


def uid_of_dir(name: str) -> str | None:
    """The pod UID a kubelet pod-cgroup directory name carries (either driver), else None."""
    match = _SYSTEMD_POD.fullmatch(name)
    if match:
        return match.group(1).replace("_", "-")
    match = _CGROUPFS_POD.fullmatch(name)
    return match.group(1) if match else None


def uid_of_proc_cgroup(text: str) -> str | None:
    """The pod UID in a ``/proc/<pid>/cgroup`` (cgroup v2 line ``0::/kubepods/.../pod<uid>/<ctr>``)."""
    for line in text.splitlines()[:64]:
        _, _, path = line.partition("::")
        for part in path.split("/")[:16]:
            uid = uid_of_dir(part)
            if uid:
                return uid
    return None


@dataclass(frozen=True)
class Layout:
    """Where pod cgroups are on this host.

    Attributes:
        root: the directory this process reads, which holds ``kubepods`` or ``kubepods.slice``.
        nvml_root: the same directory as the path NVML is given (the host's sysfs view; equal to
            ``root`` when the host's /sys/fs/cgroup is mounted at the same path, as the manifests do).
        driver: kubelet's cgroup driver, or None to detect it from the tree.
    """

    root: str = DEFAULT_ROOT
    nvml_root: str = DEFAULT_ROOT
    driver: Driver | None = None

    @classmethod
    def mounted(cls, root: str, driver: str | None) -> Layout:
        """The host's tree mounted at the same path, as the agents' manifests do (NVML's view is ``root`` too).

        ``driver`` is ``--cgroup-driver``'s value; anything but systemd or cgroupfs (None) is detected.
        """
        named: Driver | None = "systemd" if driver == "systemd" else ("cgroupfs" if driver == "cgroupfs" else None)
        return cls(root, root, named)

    def detect(self) -> Driver | None:
        """The driver whose kubepods cgroup exists under the root (systemd first), or the configured one."""
        if self.driver is not None:
            return self.driver
        if os.path.isdir(os.path.join(self.root, "kubepods.slice")):
            return "systemd"
        if os.path.isdir(os.path.join(self.root, KUBEPODS)):
            return "cgroupfs"
        return None

    def cgroup_v2(self) -> bool:
        """Whether the root is a cgroup v2 tree (only v2 has ``cgroup.controllers``)."""
        return os.path.isfile(os.path.join(self.root, "cgroup.controllers"))

    def dmem(self) -> bool:
        """Whether the kernel's dmem controller lists GPUs (Linux 6.14+; NVIDIA falls back without it)."""
        return os.path.isfile(os.path.join(self.root, "dmem.capacity"))

    def kubepods(self, driver: Driver) -> str:
        """The kubepods cgroup as NVML sees it (a cgroup that exists while kubelet runs)."""
        return f"{self.nvml_root.rstrip('/')}/{qos_dirs(driver)['guaranteed']}"

    def find(self, uid: str, driver: Driver) -> tuple[str, str] | None:
        """The pod's cgroup as (local path, NVML path) if it exists, trying every QoS class.

        Raises:
            InvalidUidError: ``uid`` is not a UUID (checked before any path is built).
        """
        for qos in QOS_CLASSES:
            rel = pod_path(uid, qos, driver)
            local = f"{self.root.rstrip('/')}/{rel}"
            if os.path.isdir(local):
                return local, f"{self.nvml_root.rstrip('/')}/{rel}"
        return None

    def pods(self, driver: Driver) -> dict[str, str]:
        """UID -> NVML path of every pod cgroup present now."""
        found: dict[str, str] = {}
        for qos, rel in qos_dirs(driver).items():
            try:
                entries = os.scandir(f"{self.root.rstrip('/')}/{rel}")
            except OSError:
                continue
            with entries:
                for entry in entries:
                    uid = uid_of_dir(entry.name)
                    if uid and entry.is_dir(follow_symlinks=False) and entry.name == pod_dir_name(uid, qos, driver):
                        found[uid] = f"{self.nvml_root.rstrip('/')}/{rel}/{entry.name}"
        return found
