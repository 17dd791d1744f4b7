"""Run the CLI as ``python -m kubectl_gpushare.cli``."""

from kubectl_gpushare.cli import main

main()
