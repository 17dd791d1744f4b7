"""The GPU-share scheduler extender (``kubectl gpushare serve-extender``).

Modules: `wire` (kube-scheduler's JSON), `state` (the locked ledger), `handlers` (pure filter,
prioritize, inspect), `binder` (bind with rollback), `cache` (list + watch), `leader` (Lease
election), `metrics`, `app` (routes), `httpd` (socket), `server` (lifecycle), `command` (CLI),
`schedsim` (a kube-scheduler HTTPExtender stand-in). Import-free, so the CLI stays fast.
"""

__all__: list[str] = []
