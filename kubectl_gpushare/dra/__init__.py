"""The DRA driver for shared GPU memory (``kubectl gpushare serve-dra-driver``) and its kubelet stand-in.

A kubelet plugin, sibling of the device plugin: both are faces over `kubectl_gpushare.node` (GPU
backends, enforcement) and neither imports the other. Generated kubelet DRA and plugin-registration
code lives in `_api`.

The package root imports nothing, so importing the CLI never loads grpc.
"""

__all__: list[str] = []
