"""kubectl-gpushare: share NVIDIA GPUs by memory on Kubernetes.

The package root stays import-free so that `kubectl-inspect-gpushare --help` starts fast.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
