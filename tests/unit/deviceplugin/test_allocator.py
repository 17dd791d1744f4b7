from __future__ import annotations

import threading

import pytest

from kubectl_gpushare import protocol
from kubectl_gpushare.deviceplugin.allocation import AllocateError, AllocationBook, StaticPods
from kubectl_gpushare.deviceplugin.allocator import (
    NoMatchingPodError,
    choose,
    container_env,
    preferred_devices,
)
from kubectl_gpushare.deviceplugin.devices import Inventory, MemoryUnit
from kubectl_gpushare.ledger import PodRecord
from kubectl_gpushare.node.fake_backend import FakeBackend


def pod(
    name: str,
    *containers: int,
    gpu: int = 0,
    assume: int = 1,
    assigned: str | None = "false",
    phase: str = "Pending",
    terminating: bool = False,
    created: str = "2026-01-01T00:00:00Z",
) -> PodRecord:
    requests = containers or (2,)
    return PodRecord(
        uid=f"uid-{name}",
        namespace="default",
        name=name,
        node="n1",
        phase=phase,
        request=sum(requests),
        container_requests=tuple(requests),
        gpu_index=gpu,
        assigned=assigned,
        assume_time=assume,
        terminating=terminating,
        created=created,
    )


def pick(
    pods: list[PodRecord],
    request: int,
    progress: dict[str, int] | None = None,
    claimed: set[str] | None = None,
    gpus: int = 2,
):
    return choose(
        pods, request, progress=progress or {}, claimed=claimed or set(), gpu_units=(16,) * gpus, node="n1"
    )


def test_oldest_assumed_pod_of_the_right_size_wins() -> None:
    pods = [pod("late", 2, gpu=1, assume=30), pod("early", 2, gpu=0, assume=10), pod("other", 4, assume=1)]
    choice = pick(pods, 2)
    assert (choice.pod.name, choice.gpu, choice.first, choice.last) == ("early", 0, True, True)


@pytest.mark.parametrize(
    "stale",
    [
        pod("assigned", assigned="true"),
        pod("no-flag", assigned=None),
        pod("no-index", gpu=-1),
        pod("running", phase="Running"),
        pod("deleting", terminating=True),
    ],
    ids=["already-assigned", "no-assigned-flag", "no-gpu-index", "running", "terminating"],
)
def test_pods_that_are_not_waiting_for_a_device_are_never_candidates(stale: PodRecord) -> None:
    with pytest.raises(NoMatchingPodError, match="no pending pod on node n1"):
        pick([stale], 2)


def test_equal_assume_times_break_ties_by_creation_then_name() -> None:
    pods = [
        pod("b", gpu=1, created="2026-01-01T00:00:02Z"),
        pod("c", gpu=0, created="2026-01-01T00:00:01Z"),
        pod("a", gpu=1, created="2026-01-01T00:00:02Z"),
    ]
    assert [pick(pods, 2, claimed=claimed).pod.name for claimed in (set(), {"uid-c"}, {"uid-c", "uid-a"})] == [
        "c",
        "a",
        "b",
    ]


def test_multi_container_pod_is_served_container_by_container() -> None:
    multi = pod("multi", 2, 0, 3, gpu=1)
    first = pick([multi], 2)
    assert (first.container, first.first, first.last) == (0, True, False)
    second = pick([multi], 3, progress={"uid-multi": 1})
    assert (second.container, second.first, second.last, second.gpu) == (2, False, True, 1)


def test_pod_in_mid_admission_goes_before_older_fresh_pods() -> None:
    older = pod("older", 3, assume=1)
    started = pod("started", 2, 3, assume=5, gpu=1)
    assert pick([older, started], 3, progress={"uid-started": 1}).pod.name == "started"


def test_first_container_size_must_match_not_the_pod_total() -> None:
    with pytest.raises(NoMatchingPodError):
        pick([pod("multi", 2, 3)], 5)


def test_single_gpu_node_adopts_a_pod_the_extender_never_saw() -> None:
    stray = pod("stray", 4, gpu=-1, assigned=None)
    choice = pick([stray], 4, gpus=1)
    assert choice.adopt and choice.gpu == 0
    with pytest.raises(NoMatchingPodError):
        pick([stray], 4, gpus=2)


def test_no_match_message_names_size_unit_and_resource() -> None:
    with pytest.raises(NoMatchingPodError) as info:
        choose([], 3, progress={}, claimed=set(), gpu_units=(16, 16), node="gpu-7", unit="GiB")
    assert "gpu-7" in str(info.value) and "3 GiB" in str(info.value) and protocol.RESOURCE_MEM in str(info.value)


def test_env_matches_the_original_names_and_values() -> None:
    backend = FakeBackend.from_spec("2x16GiB", seed="n1")
    gpu1 = backend.devices()[1]
    choice = pick([pod("p", 2, 3, gpu=1)], 2)
    env = container_env(choice, gpu1, container_units=2, gpu_units=16, visible="index", cgpu_disable=True)
    assert env == {
        "NVIDIA_VISIBLE_DEVICES": "1",
        "ALIYUN_COM_GPU_MEM_IDX": "1",
        "ALIYUN_COM_GPU_MEM_POD": "5",
        "ALIYUN_COM_GPU_MEM_CONTAINER": "2",
        "ALIYUN_COM_GPU_MEM_DEV": "16",
        "CGPU_DISABLE": "true",
    }
    assert (
        container_env(choice, gpu1, container_units=2, gpu_units=16, visible="uuid")["NVIDIA_VISIBLE_DEVICES"]
        == gpu1.uuid
    )


def test_preferred_devices_take_the_pods_gpu_first() -> None:
    available = [protocol.fake_device_id(u, j) for u in ("GPU-a", "GPU-b") for j in range(3)]
    assert preferred_devices(available, [], 2, "GPU-b") == ["GPU-b-_-0", "GPU-b-_-1"]
    assert preferred_devices(available, ["GPU-a-_-2"], 2, "GPU-b") == ["GPU-a-_-2", "GPU-b-_-0"]
    assert preferred_devices(available, [], 4, "GPU-b") == ["GPU-b-_-0", "GPU-b-_-1", "GPU-b-_-2", "GPU-a-_-0"]
    assert len(preferred_devices(available, [], 2, None)) == 2


# --- the stateful book ---------------------------------------------------------------------------


class Recorder:
    def __init__(self, fail: int = 0) -> None:
        self.fail = fail
        self.writes: list[tuple[str, dict[str, str]]] = []

    def record(self, pod: PodRecord, annotations: dict[str, str]) -> None:
        if self.fail:
            self.fail -= 1
            raise RuntimeError("the server answered HTTP 503")
        self.writes.append((pod.name, annotations))


def book_for(
    pods: list[PodRecord], spec: str = "2x16GiB", recorder: Recorder | None = None
) -> tuple[AllocationBook, Recorder]:
    backend = FakeBackend.from_spec(spec, seed="n1")
    recorder = recorder or Recorder()
    book = AllocationBook(
        node="n1",
        inventory=Inventory.of(backend.devices(), MemoryUnit("GiB")),
        inventory_lock=threading.Lock(),
        source=StaticPods(pods),
        recorder=recorder,
        clock_ns=lambda: 42,
    )
    return book, recorder


def ids(book: AllocationBook, gpu: int, count: int) -> list[str]:
    uuid = book.inventory.gpus()[gpu].uuid
    return [protocol.fake_device_id(uuid, j) for j in range(count)]


def test_two_same_size_pods_each_get_their_own_gpu_even_with_a_stale_cache() -> None:
    a, b = pod("a", 4, gpu=0, assume=1), pod("b", 4, gpu=1, assume=2)
    book, recorder = book_for([a, b])  # the cache never learns about the patches
    first = book.allocate(ids(book, 0, 4))
    second = book.allocate(ids(book, 1, 4))
    assert (first.pod.name, first.env["NVIDIA_VISIBLE_DEVICES"]) == ("a", "0")
    assert (second.pod.name, second.env["NVIDIA_VISIBLE_DEVICES"]) == ("b", "1")
    assert [name for name, _ in recorder.writes] == ["a", "b"]
    assert recorder.writes[0][1] == {"ALIYUN_COM_GPU_MEM_ASSIGNED": "true", "ALIYUN_COM_GPU_MEM_ASSIGN_TIME": "42"}
    with pytest.raises(AllocateError, match="no pending pod"):
        book.allocate(ids(book, 0, 4))


def test_multi_container_pod_is_recorded_once_and_every_container_gets_the_gpu() -> None:
    book, recorder = book_for([pod("multi", 1, 0, 2, gpu=1)])
    envs = [book.allocate(ids(book, 1, 1)).env, book.allocate(ids(book, 1, 2)).env]
    assert [env["ALIYUN_COM_GPU_MEM_IDX"] for env in envs] == ["1", "1"]
    assert [env["ALIYUN_COM_GPU_MEM_CONTAINER"] for env in envs] == ["1", "2"]
    assert {env["ALIYUN_COM_GPU_MEM_POD"] for env in envs} == {"3"}
    assert len(recorder.writes) == 1


def test_failed_record_fails_the_call_and_leaves_the_pod_available() -> None:
    book, recorder = book_for([pod("p", 2, gpu=1)], recorder=Recorder(fail=1))
    with pytest.raises(AllocateError, match="could not record GPU 1 on pod default/p") as info:
        book.allocate(ids(book, 1, 2))
    assert info.value.retryable
    assert book.allocate(ids(book, 1, 2)).pod.name == "p"
    assert len(recorder.writes) == 1


def test_pod_naming_a_missing_gpu_is_refused() -> None:
    book, _ = book_for([pod("p", 2, gpu=5)])
    with pytest.raises(AllocateError, match="no such GPU"):
        book.allocate(ids(book, 0, 2))


def test_single_gpu_node_adoption_writes_all_annotations() -> None:
    book, recorder = book_for([pod("stray", 3, gpu=-1, assigned=None)], spec="1x24GiB")
    allocated = book.allocate(ids(book, 0, 3))
    assert allocated.env["NVIDIA_VISIBLE_DEVICES"] == "0"
    assert recorder.writes == [
        (
            "stray",
            {
                "ALIYUN_COM_GPU_MEM_ASSIGNED": "true",
                "ALIYUN_COM_GPU_MEM_ASSIGN_TIME": "42",
                "ALIYUN_COM_GPU_MEM_IDX": "0",
                "ALIYUN_COM_GPU_MEM_POD": "3",
                "ALIYUN_COM_GPU_MEM_DEV": "24",
                "ALIYUN_COM_GPU_MEM_ASSUME_TIME": "42",
            },
        )
    ]


def test_preferred_allocation_steers_to_the_next_pods_gpu() -> None:
    book, _ = book_for([pod("p", 2, gpu=1)])
    available = ids(book, 0, 16) + ids(book, 1, 16)
    assert book.preferred(available, [], 2) == ids(book, 1, 2)


def test_concurrent_allocates_never_hand_one_pod_to_two_containers() -> None:
    from concurrent.futures import ThreadPoolExecutor

    waiting = [pod(f"p{i:02d}", 1, gpu=i % 2, assume=i) for i in range(40)]
    book, recorder = book_for(waiting)
    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(lambda i: book.allocate(ids(book, i % 2, 1)), range(40)))
    assert sorted(r.pod.name for r in results) == sorted(p.name for p in waiting)
    assert len(recorder.writes) == 40
    assert all(r.env["ALIYUN_COM_GPU_MEM_IDX"] == str(r.pod.gpu_index) for r in results)


def test_arrival_on_the_node_beats_assume_time_for_equal_sizes() -> None:
    # The extender stamped "first" earlier but bound "second" first: kubelet admits "second" first.
    first, second = pod("first", 4, gpu=0, assume=10), pod("second", 4, gpu=1, assume=20)
    arrival = {"uid-second": 1, "uid-first": 2}
    choice = choose([first, second], 4, progress={}, claimed=set(), gpu_units=(16, 16), arrival=arrival)
    assert (choice.pod.name, choice.gpu) == ("second", 1)
    listed_at_start = pod("old", 4, gpu=0, assume=99)
    again = choose([second, listed_at_start], 4, progress={}, claimed=set(), gpu_units=(16, 16), arrival=arrival)
    assert again.pod.name == "old"
