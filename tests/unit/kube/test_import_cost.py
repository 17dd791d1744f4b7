"""The kube layer stays cheap to import: the CLI's start-up budget cannot afford `kubernetes`."""

from __future__ import annotations

import subprocess
import sys


def test_kube_modules_do_not_import_heavy_packages() -> None:
    code = (
        "import sys\n"
        "import kubectl_gpushare.kube.client, kubectl_gpushare.kube.config, kubectl_gpushare.kube.informer\n"
        "import kubectl_gpushare.kube.records, kubectl_gpushare.kube.retry\n"
        "heavy = [m for m in ('kubernetes', 'urllib3', 'grpc', 'rich', 'yaml', 'pydantic') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == ""
