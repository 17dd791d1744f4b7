"""The GPU-memory device plugin (``kubectl gpushare serve-device-plugin``) and its kubelet stand-in.

The GPU backends (`kubectl_gpushare.node`: `gpus`, `nvml_backend`, `fake_backend`) and memory
enforcement / usage (`node.enforce`, `node.usage`, `node.http`) live in the node package, shared with
a later DRA driver. Modules: `node_agent` (enforcement, sampling and the usage port beside
Allocate), `devices` (fake device ids, units, kubelet's message budget), `allocator` (which pod an
Allocate call is for; pure), `allocation` (the stateful, locked side of Allocate), `servicer`
(gRPC), `kubelet` (registration and restart detection), `cluster` (API server: watch cache and
writes), `daemon` (``serve``), `command` (click), `kubeletsim` (kubelet stand-in for tests and the
demo). Generated v1beta1 code lives in `_api`.

The package root imports nothing, so importing the CLI never loads grpc.
"""

__all__: list[str] = []
