"""Generated kubelet DRA (v1, v1beta1) and plugin-registration (v1) gRPC code (DO NOT EDIT; see regen.py)."""
