"""What a node agent does on its host, shared by the device plugin and a later DRA driver.

`gpus` (the GPU backend seam and its records), `nvml_backend` / `fake_backend` (real GPUs and
``--fake-gpus``), `cgroups` (where kubelet puts pod cgroups; pure), `enforce` (per-pod GPU memory
limits through the driver), `usage` (what pods really hold), `http` (``/metrics`` and ``/usage``),
`daemon` (the agents' one `DaemonError`, backend opening and exit on error).
No gRPC and no Kubernetes client here: pods arrive as `enforce.PodShare` records.
"""
