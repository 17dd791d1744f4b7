"""Against a real driver: a process in a pod's cgroup allocates GPU memory; the sampler finds it (skipped without one).

The allocating child speaks CUDA's driver API through ``libcuda.so.1`` (installed with every NVIDIA
driver) with ctypes, so no CUDA toolkit or framework is needed: ``cuInit``,
``cuDevicePrimaryCtxRetain`` + ``cuCtxSetCurrent`` and ``cuMemAlloc_v2`` (CUDA Driver API reference,
sections "Initialization", "Primary Context Management", "Memory Management"). It joins a cgroup named
like kubelet's cgroupfs pod cgroup (``pod<uid>``) under a scratch cgroup, which is all
``/proc/<pid>/cgroup`` needs to name the pod; nothing is created under a real ``kubepods``.
"""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from real_nvml import real_backend, scratch_cgroup
from waiting import wait_for

from kubectl_gpushare.node.enforce import PodShare
from kubectl_gpushare.node.usage import Sampler

MiB = 1 << 20
ALLOCATE = 256 * MiB

CHILD = f"""
import ctypes, sys
cuda = ctypes.CDLL("libcuda.so.1")
def ok(rc, what):
    if rc != 0:
        print(f"{{what}} failed: CUresult {{rc}}", flush=True)
        sys.exit(3)
ok(cuda.cuInit(0), "cuInit")
dev = ctypes.c_int()
ok(cuda.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
ctx = ctypes.c_void_p()
ok(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
ok(cuda.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
ptr = ctypes.c_uint64()
ok(cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t({ALLOCATE})), "cuMemAlloc")
print("allocated", flush=True)
sys.stdin.read()
"""


@pytest.mark.gpu
def test_real_process_memory_is_charged_to_its_pod() -> None:
    pod_uid = str(uuid.uuid4())
    with real_backend() as backend, scratch_cgroup(f"pod{pod_uid}") as pod_cgroup:
        gpu = backend.devices()[0]
        child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 text=True)
        try:
            with open(f"{pod_cgroup}/cgroup.procs", "w") as procs:
                procs.write(str(child.pid))
            assert child.stdout is not None
            line = child.stdout.readline().strip()
            if line != "allocated":
                pytest.skip(f"could not allocate through libcuda: {line or child.wait()}")
            share = PodShare(uid=pod_uid, namespace="default", name="greedy", gpu=gpu.index, bytes=1 << 30)
            sampler = Sampler("node-a", backend, lambda: [gpu], lambda: [share])

            def charged() -> int:
                return sampler.sample().pods[0].used_bytes or 0

            wait_for(lambda: charged() >= ALLOCATE, timeout=20, what="the child's allocation charged to its pod")
            report = sampler.sample()
            assert report.source == "processes"
            assert report.gpus[0].used_bytes is not None and report.gpus[0].used_bytes >= ALLOCATE
            assert ALLOCATE <= (report.pods[0].used_bytes or 0) < gpu.memory
        finally:
            child.kill()
            child.wait()  # out of the cgroup before it is removed
