# One image for both in-cluster components:
#   kubectl-gpushare serve-extender        (Deployment, runs as non-root)
#   kubectl-gpushare serve-device-plugin   (DaemonSet; needs root for kubelet's device-plugin socket directory)
# NVML comes from the host driver, injected by the NVIDIA container runtime (see manifests/base/device-plugin.yaml).
# The image carries the daemons' dependencies (kubectl-gpushare[daemons]); the kubectl plugin alone needs none of them.
#
# The base is pinned to a patch release; pin it to a digest as well when releasing
# (docker buildx imagetools inspect python:3.11.11-slim-bookworm).
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY setup.cfg pyproject.toml README.md ./
COPY manifests ./manifests
COPY kubectl_gpushare ./kubectl_gpushare
RUN pip wheel --no-cache-dir --wheel-dir /wheels '.[daemons]'

FROM ${PYTHON_IMAGE}
# The root filesystem is read-only in the manifests: no bytecode is written at run time.
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels 'kubectl-gpushare[daemons]' && rm -rf /wheels
USER 65532:65532
ENTRYPOINT ["kubectl-gpushare"]
CMD ["--help"]
