"""The scheduler stand-in's own filters: a pod with required node affinity vs one without (goal: within 1.5x).

    .venv/bin/python bench/bench_scheduler_filters.py            # 2,000 nodes, half tainted
    .venv/bin/python bench/bench_scheduler_filters.py --quick    # 200 nodes
    .venv/bin/python bench/bench_scheduler_filters.py --nodes 20 # any count

Times `SchedulerLoop.schedule` for pods no node can take (each asks more CPU than any node has),
so every filter runs on every node and no write is made: a plain pod, a pod whose three-term
required affinity (racks, an ``Lt``, ``metadata.name NotIn``; each term valid) passes every node to
NodeResourcesFit,
and a hostile pod with 100,000 distinct terms naming racks no node has (valid: pod validation sets
no count, so `node_affinity` judges them all, asking a node only the terms its labels may match).
Prints the median seconds of ``--runs`` retries of each (the loop decodes a pod version's placement
once) and the hostile pod's first cycle, with the ratios to the plain pod, side by side in one process.

Then two pods of 142,000 distinct terms the term index cannot narrow (``NotIn`` only: every term is
asked of every node, about 150 ms a node): one reading only ``rack`` (nodes on a rack share its
verdict), one also ``kubernetes.io/hostname`` (each node its own). For each: the seconds of its
first cycles (after the placement's decoding, which is timed apart) until one judges every node,
and how many cycles that took: a cycle that runs out of its budget fails, as `SchedulerLoop`
retries it, so no one pod holds the loop for long.

Last, the largest affinities a pod can hold (285,975 one-requirement terms of three kinds, one term
of 285,975 requirements, one requirement of 1.5M values): each pod's first cycle, which decodes it
and compiles a share (`AFFINITY_COMPILE_BUDGET`), beside the first cycle of the same pod compiling
it all at once (as upstream does), and its cycles until every node is judged.

``--tolerations`` prints one line only: at 5,000 nodes (``--taint-nodes``) of three taints each
(sets of a small pool, so nodes share them), a pod of 3 tolerations against a hostile pod of as
many distinct tolerations as a 3 MiB request body holds (kube-apiserver's ``MaxRequestBodyBytes``),
those tolerating the nodes' taints last (a scan toleration by toleration asks them all of each
taint of each node): the hostile pod's first cycle (decoding its tolerations) and its repeat cycle,
side by side. Scanned so, 500 nodes took 8.4 s a cycle (3,400x); indexed (`kube.taints.TolerationIndex`),
5,000 nodes take 1.2-1.4x the pod of four, 3x on the first cycle.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from collections.abc import Iterator
from typing import Any, cast

from kubectl_gpushare.cli import noderesources
from kubectl_gpushare.cli.dynamicresources import Unschedulable
from kubectl_gpushare.cli.scheduler import SandboxView, SchedulerLoop
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.node_affinity import MAX_POD_REQUIREMENTS, MAX_POD_VALUES
from kubectl_gpushare.sandbox.builders import node_object, pod_object

TOLERATE = [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]


def nodes(count: int) -> list[dict[str, Any]]:
    """``count`` Ready nodes on four racks, every other one tainted ``dedicated:NoSchedule``."""
    made = []
    for i in range(count):
        node = node_object(f"n{i}", [16], ip="10.0.0.1", labels={"rack": f"r{i % 4}", "slot": str(i)},
                           taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}] if i % 2 else None)
        node["metadata"]["resourceVersion"] = str(i + 1)
        made.append(node)
    return made


def pod(name: str, terms: list[dict[str, Any]] | None) -> dict[str, Any]:
    """A pod asking 10,000 CPUs (no node fits) that tolerates the taint; ``terms``: its required affinity."""
    made = pod_object(name, "default", [0])
    made["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "10000"}}
    made["spec"]["tolerations"] = TOLERATE
    made["metadata"]["resourceVersion"] = "1"  # as stored: the loop decodes a pod version once
    if terms is not None:
        made["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": terms}}}
    return made


def seconds(loop: SchedulerLoop, target: dict[str, Any], cluster: list[dict[str, Any]], runs: int) -> float:
    """Median seconds of one scheduling cycle of ``target`` (a retry: its first cycles, compiling it, are not timed)."""
    cycles_until_judged(loop, target, cluster, 1000)
    used = noderesources.usage([])
    return statistics.median(_unplaced(*timed_cycle(loop, target, cluster, used))[0] for _ in range(runs))


def first_seconds(loop: SchedulerLoop, target: dict[str, Any], cluster: list[dict[str, Any]]) -> float:
    """Seconds of the pod version's first cycle, which decodes its placement and compiles a share of it."""
    return timed_cycle(loop, target, cluster, noderesources.usage([]))[0]


def timed_cycle(loop: SchedulerLoop, target: dict[str, Any], cluster: list[dict[str, Any]],
                used: noderesources.NodeUsage) -> tuple[float, Unschedulable | None]:
    """Seconds of one scheduling cycle of ``target``, and its FitError (None: the pod was placed)."""
    start = time.perf_counter()
    try:
        loop.schedule(target, cluster, used)
    except Unschedulable as exc:  # no node fits: kube-scheduler's FitError
        return time.perf_counter() - start, exc
    return time.perf_counter() - start, None


def _unplaced(took: float, failure: Unschedulable | None) -> tuple[float, Unschedulable]:
    """A `timed_cycle` whose pod fits no node, as every benchmark pod must; exits where one was placed."""
    if failure is None:
        raise SystemExit("a pod was placed: the benchmark's pods must fit no node")
    return took, failure


UNNARROWED_TERMS = 142_000
"""Distinct terms of the hostile pods the term index cannot narrow: about what a 3 MiB pod holds of them."""


def unnarrowed(hostname: bool) -> list[dict[str, Any]]:
    """Terms that no node matches and that name no value a node must have (``NotIn`` only): asked of every node."""
    racks = {"key": "rack", "operator": "NotIn", "values": ["r0", "r1", "r2", "r3"]}
    return [{"matchExpressions": [
        {"key": "kubernetes.io/hostname" if hostname else "rack", "operator": "NotIn", "values": [f"h{i}"]}, racks]}
        for i in range(UNNARROWED_TERMS)]


def cycles_until_judged(loop: SchedulerLoop, target: dict[str, Any], cluster: list[dict[str, Any]],
                        most: int) -> tuple[list[float], bool]:
    """Seconds of each cycle of ``target`` until one fails on the nodes' own verdicts (at most ``most`` cycles).

    A cycle that runs out of the affinity's budget fails with a message that says so; the next
    resumes. Returns the cycles' seconds and whether the last judged every node.
    """
    used = noderesources.usage([])
    times = []
    for _ in range(most):
        took, failure = _unplaced(*timed_cycle(loop, target, cluster, used))
        times.append(took)
        if "budget" not in str(failure):
            return times, True
    return times, False


def unnarrowed_report(loop: SchedulerLoop, cluster: list[dict[str, Any]], hostname: bool, most: int) -> str:
    """One line on a hostile pod of `unnarrowed` terms: its decoding, its longest cycle, cycles to judge all."""
    target = pod("hostname" if hostname else "racks", unnarrowed(hostname))
    start = time.perf_counter()
    loop._placement(target)  # decoding and compiling, once per pod version: timed apart
    decoded = time.perf_counter() - start
    times, judged = cycles_until_judged(loop, target, cluster, most)
    reads = "rack and hostname" if hostname else "rack only"
    return (f"  {UNNARROWED_TERMS:,} unnarrowed terms reading {reads}: decoding {decoded:.2f} s; "
            f"{len(times)} cycle(s), longest {max(times):.2f} s, all {sum(times):.2f} s; "
            + ("every node judged" if judged else f"not every node judged after {most} cycles"))


def largest() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """The largest affinities a pod can hold (`node_affinity.MAX_POD_REQUIREMENTS` and kin), one at a time."""
    most = MAX_POD_REQUIREMENTS

    def one(key: str, operator: str, value: str) -> dict[str, Any]:
        return {"key": key, "operator": operator, "values": [value]}

    yield f"{most:,} terms of one In", [{"matchExpressions": [one("rack", "In", f"h{i}")]} for i in range(most)]
    yield f"{most:,} terms of one NotIn", [{"matchExpressions": [one("rack", "NotIn", f"h{i}")]} for i in range(most)]
    yield (f"{most:,} terms of one metadata.name NotIn",
           [{"matchFields": [one("metadata.name", "NotIn", f"h{i}")]} for i in range(most)])
    yield f"one term of {most:,} requirements", [{"matchExpressions": [one("rack", "NotIn", f"h{i}")
                                                                       for i in range(most)]}]
    yield f"one requirement of {MAX_POD_VALUES - 1:,} values", [{"matchExpressions": [
        {"key": "rack", "operator": "In", "values": [f"h{i}" for i in range(MAX_POD_VALUES - 1)]}]}]


def largest_report(cluster: list[dict[str, Any]], most: int) -> None:
    """For each of the `largest` affinities: its first cycle compiling a share, beside compiling it all at once.

    Each pod is decoded afresh in each loop (a new pod version); cycles run until one judges every
    node (the rest of the affinity compiled, then its budget of terms asked). Each shape is built
    alone, and what the one before left collected, so no cycle pays for another's garbage.
    """
    for name, terms in largest():
        gc.collect()
        at_once = SchedulerLoop(cast(SandboxView, None), cast(Client, None), [], compile_budget=1 << 62)
        whole = first_seconds(at_once, pod("whole", terms), cluster)
        del at_once
        gc.collect()
        loop = SchedulerLoop(cast(SandboxView, None), cast(Client, None), [])
        times, judged = cycles_until_judged(loop, pod("shared", terms), cluster, most)
        print(f"  {name}: first cycle {times[0]:.2f} s, compiling it all at once {whole:.2f} s "
              f"({times[0] / whole:.2f}x); {len(times)} cycle(s), longest {max(times):.2f} s, all {sum(times):.2f} s; "
              + ("every node judged" if judged else f"not every node judged after {most} cycles"), flush=True)


TAINT_POOL = [{"key": f"pool-{i}", "value": f"v{i}", "effect": ("NoSchedule", "NoExecute")[i % 2]}
              for i in range(6)]
"""The taints nodes carry, three each (`tainted_nodes`): nodes share their taint sets, as real pools do."""
REQUEST_BODY_BYTES = 3 * 1024 * 1024
"""kube-apiserver's largest request body (``MaxRequestBodyBytes``, 3 MiB): bounds a pod's tolerations."""


def tainted_nodes(count: int) -> list[dict[str, Any]]:
    """``count`` Ready nodes, each tainted with three of `TAINT_POOL` (six distinct sets)."""
    made = []
    for i in range(count):
        taints = [TAINT_POOL[(i + k) % len(TAINT_POOL)] for k in range(3)]
        node = node_object(f"t{i}", [16], ip="10.0.0.1", labels={"slot": str(i)}, taints=taints)
        node["metadata"]["resourceVersion"] = str(i + 1)
        made.append(node)
    return made


def tolerating(name: str, tolerations: list[dict[str, str]]) -> dict[str, Any]:
    """A pod no node fits (10,000 CPUs) with these tolerations."""
    made = pod(name, None)
    made["spec"]["tolerations"] = tolerations
    return made


def hostile_tolerations() -> list[dict[str, str]]:
    """As many distinct tolerations tolerating nothing as fill a 3 MiB pod, then those of `TAINT_POOL`.

    The shortest valid distinct ones (``{"key":"k00000","operator":"Exists"}``): the most a pod holds.
    """
    wanted = [{"key": t["key"], "operator": "Equal", "value": t["value"], "effect": t["effect"]} for t in TAINT_POOL]
    room = REQUEST_BODY_BYTES - len(json.dumps(tolerating("hostile", wanted), separators=(",", ":")))
    one = len(json.dumps({"key": "k00000", "operator": "Exists"}, separators=(",", ":"))) + 1
    filler = [{"key": f"k{i:05d}", "operator": "Exists"} for i in range(room // one)]
    return filler + wanted


def tolerations_report(count: int, runs: int) -> None:
    """The hostile pod's first and repeat cycles at ``count`` tainted nodes, beside a pod of 3 tolerations."""
    cluster = tainted_nodes(count)
    loop = SchedulerLoop(cast(SandboxView, None), cast(Client, None), [])
    normal = tolerating("normal", [{"key": t["key"], "operator": "Exists"} for t in TAINT_POOL[:3]]
                        + [{"operator": "Exists", "effect": "NoExecute"}])
    hostile = hostile_tolerations()
    body = len(json.dumps(tolerating("hostile", hostile), separators=(",", ":")))
    plain = seconds(loop, normal, cluster, runs)
    first = first_seconds(loop, tolerating("hostile", hostile), cluster)
    repeat = seconds(loop, tolerating("hostile", hostile), cluster, runs)
    print(f"{count} nodes of 3 taints each, per cycle: a pod of {len(normal['spec']['tolerations'])} tolerations "
          f"{plain * 1e3:.1f} ms; one of {len(hostile):,} tolerations ({body / 2**20:.2f} MiB) first cycle "
          f"{first * 1e3:.1f} ms ({first / plain:.1f}x), repeat {repeat * 1e3:.1f} ms ({repeat / plain:.2f}x)",
          flush=True)


def main() -> None:
    """Run the comparison and print it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 nodes instead of 2,000")
    parser.add_argument("--nodes", type=int, help="this many nodes instead")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--cycles", type=int, default=1000, help="most cycles of a hostile pod to run")
    parser.add_argument("--tolerations", action="store_true", help="only the line on a pod's tolerations")
    parser.add_argument("--taint-nodes", type=int, default=5000, help="tainted nodes for --tolerations")
    args = parser.parse_args()
    if args.tolerations:
        tolerations_report(args.taint_nodes, args.runs)
        return
    cluster = nodes(args.nodes or (200 if args.quick else 2000))
    # schedule() reads neither the store nor the API when no node fits: neither is needed.
    loop = SchedulerLoop(cast(SandboxView, None), cast(Client, None), [])
    affine = [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r0", "r1", "r2", "r3"]}]},
              {"matchExpressions": [{"key": "slot", "operator": "Lt", "values": ["100000"]}]},
              {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["none"]}]}]
    hostile = [{"matchExpressions": [{"key": "rack", "operator": "In", "values": [f"h{i}"]}]} for i in range(100_000)]
    plain = seconds(loop, pod("plain", None), cluster, args.runs)
    with_affinity = seconds(loop, pod("affine", affine), cluster, args.runs)
    first = first_seconds(loop, pod("hostile", hostile), cluster)
    refused = seconds(loop, pod("hostile", hostile), cluster, args.runs)
    print(f"{len(cluster)} nodes, per cycle: plain pod {plain * 1e3:.1f} ms, with a 3-term affinity "
          f"{with_affinity * 1e3:.1f} ms ({with_affinity / plain:.2f}x), with 100,000 terms {refused * 1e3:.1f} ms "
          f"({refused / plain:.2f}x; its first cycle, decoding them and compiling a share, {first * 1e3:.1f} ms, "
          f"{first / plain:.1f}x)")
    for hostname in (False, True):
        print(unnarrowed_report(loop, cluster, hostname, args.cycles), flush=True)
    print("The largest affinities a pod can hold (3 MiB), each pod's cycles until every node is judged:")
    largest_report(cluster, args.cycles)


if __name__ == "__main__":
    main()
