"""Generated kubelet device-plugin v1beta1 gRPC code (DO NOT EDIT; see regen.py)."""
