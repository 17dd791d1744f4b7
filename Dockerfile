# One image for both in-cluster components:
#   kubectl-gpushare serve-extender        (Deployment, runs as non-root)
#   kubectl-gpushare serve-device-plugin   (DaemonSet; needs root for kubelet's device-plugin socket directory)
# NVML comes from the host driver, injected by the NVIDIA container runtime (see manifests/base/device-plugin.yaml).
FROM python:3.11-slim AS build
WORKDIR /src
COPY setup.cfg pyproject.toml README.md ./
COPY manifests ./manifests
COPY kubectl_gpushare ./kubectl_gpushare
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER 65532:65532
ENTRYPOINT ["kubectl-gpushare"]
CMD ["--help"]
