"""An embedded Kubernetes API server for tests, benchmarks and the demo (the "sandbox").

It speaks the Kubernetes REST wire format over HTTP/1.1 on 127.0.0.1, faithfully enough that the
real ``kubectl`` and the ``kubernetes`` Python client work against it unchanged. Entry points:
``kubectl_gpushare.sandbox.server.Sandbox`` (in-process), ``kubectl_gpushare.sandbox.spec``
(cluster specs and the generator) and ``kubectl gpushare sandbox`` (``command.py``).

Where it deliberately differs from kube-apiserver (see ``server.py``): no admission chain (pods may
be created in namespaces that do not exist), no real RBAC engine (a fixed admin token and a
read-only token), no etcd (state lives in memory, optionally saved to a JSON file), no
protobuf, no server-side apply, no graceful deletion (pods are removed at once, unless finalizers
hold them, as they hold any object: ``finalization.py``).

The package root imports nothing, so the CLI can list the ``sandbox`` command cheaply.
"""

__all__: list[str] = []
