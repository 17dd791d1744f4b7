"""``kubectl inspect gpushare``: shared GPU memory per node, GPU and pod, as text, JSON, YAML, CSV or rich.

Modules: `command` (flags, errors, exit codes), `kube.flags` (kubectl's connection flags, shared),
`source` (API or ``--from-file`` into a ledger), `compat` (the original's two views, byte for
byte) on top of `tabwriter` (Go's text/tabwriter), `report` (versioned JSON/YAML/CSV), `wide`,
`pretty` (rich, loaded only for ``-o pretty``), `order` (``--sort``), `selector` (offline ``-l``)
and `label_nodes` (``kubectl gpushare label-nodes``). Views render from a `ledger.Ledger` and never
count pods themselves. Nothing here is imported eagerly: the CLI loads `command` on use.
"""

__all__: list[str] = []
