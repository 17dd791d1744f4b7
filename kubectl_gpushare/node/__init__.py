"""What a node agent does on its host, shared by the device plugin and a later DRA driver.

The GPU backend seam (`gpus`, `nvml_backend`, `fake_backend`): no gRPC, no Kubernetes faces.
"""
