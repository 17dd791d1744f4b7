"""The project's one way to talk to the Kubernetes API.

- `kube.errors`: the small error set every failure is mapped to (with CLI exit codes).
- `kube.types`: frozen msgspec Structs of the fields read, and their reusable decoders.
- `kube.records`: decoded objects -> `ledger` records, warning once per malformed value.
- `kube.config`: kubeconfig / in-cluster resolution as kubectl does it, without `kubernetes`.
- `kube.client`: a thread-safe keep-alive REST client with paginated lists and watches
  (`kube._transport` speaks HTTP, `kube.watch` reads watch streams).
- `kube.retry`: bounded retries with backoff for transient failures.
- `kube.informer`: list + watch caches with typed callbacks for the daemons.

This package root imports nothing, so importing a submodule pays only for what it uses.
"""

__all__: list[str] = []
