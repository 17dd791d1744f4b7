#!/bin/sh
# kubectl-gpushare launcher, shipped in the krew archive next to the kubectl-gpushare wheel.
#
# krew installs one executable per plugin; kubectl-gpushare is Python, so this script installs the
# bundled wheel into a private virtual environment on first run (pip fetches its dependencies, so
# the first run needs Python 3.11+ and access to PyPI), then hands every run over to it. Only the
# plugin's own dependencies are installed (click, msgspec, PyYAML, rich): the daemons' extra
# (kubectl-gpushare[daemons]: grpcio, protobuf, nvidia-ml-py, prometheus-client, kubernetes) is
# for the in-cluster image or a pipx install, not for a kubectl plugin (krew cannot add extras to its
# own environment).
# Called as kubectl-inspect-gpushare or kubectl-inspect_gpushare it runs `inspect` directly.
#   KUBECTL_GPUSHARE_PYTHON  interpreter for the first-run install (default: python3)
#   KUBECTL_GPUSHARE_HOME    where environments live (default: $XDG_DATA_HOME/kubectl-gpushare)
set -eu

version="@VERSION@"
self=$(readlink -f "$0" 2>/dev/null || printf '%s' "$0")
here=$(dirname "$self")
home=${KUBECTL_GPUSHARE_HOME:-${XDG_DATA_HOME:-$HOME/.local/share}/kubectl-gpushare}
env="$home/$version"
python=${KUBECTL_GPUSHARE_PYTHON:-python3}

if [ ! -f "$env/.complete" ]; then
    if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
        echo "kubectl-gpushare: needs Python 3.11 or newer as '$python' (set KUBECTL_GPUSHARE_PYTHON)" >&2
        exit 2
    fi
    echo "kubectl-gpushare: first run, installing $version into $env" >&2
    rm -rf "$env"
    mkdir -p "$home"
    "$python" -m venv "$env"
    "$env/bin/python" -m pip install --quiet --disable-pip-version-check "$here"/kubectl_gpushare-*.whl
    : > "$env/.complete"
fi

# Tells the plugin it runs in krew's private environment, so a missing-extra hint names what works here.
export KUBECTL_GPUSHARE_LAUNCHER=krew
case $(basename "$0") in
    kubectl-inspect-gpushare | kubectl-inspect_gpushare) exec "$env/bin/kubectl-inspect-gpushare" "$@" ;;
    *) exec "$env/bin/kubectl-gpushare" "$@" ;;
esac
