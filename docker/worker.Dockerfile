# A grading worker. With GPUs (the NVIDIA container runtime, see compose.gpu.yaml) it runs one
# worker process per GPU (`kernelgrader worker --gpus all`); without, it compiles only. The
# entrypoint (docker/worker-entrypoint.sh) builds the CuPy kernel cache once where a GPU is. CuPy
# brings its CUDA libraries as wheels; the host needs only the NVIDIA driver. Build from the
# repository root: docker build -f docker/worker.Dockerfile -t kernelgrader-worker .
# BASE_IMAGE and PIP_INDEX_OPTS as in web.Dockerfile.
ARG BASE_IMAGE=nvidia/cuda:13.0.1-base-ubuntu24.04
FROM ${BASE_IMAGE}
ARG PIP_INDEX_OPTS=""
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONUNBUFFERED=1 \
    KERNELGRADER_DATA_DIR=/var/lib/kernelgrader KERNELGRADER_KERNEL_CACHE_DIR=/var/cache/kernelgrader
RUN python3 -c "import venv, ensurepip" 2>/dev/null || { apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/*; }
RUN python3 -m venv /opt/kernelgrader && useradd --create-home --uid 10001 kernelgrader \
    && mkdir -p /var/lib/kernelgrader /var/cache/kernelgrader /run/lock/kernelgrader \
    && chown kernelgrader /var/lib/kernelgrader /var/cache/kernelgrader \
    && chmod 1777 /run/lock/kernelgrader
# One stage: with an index, docker/wheels holds only its README; without, its wheels stay in a
# layer of their own, which costs disk but no copy of the installed packages.
COPY docker/wheels/ /wheels/
COPY pyproject.toml setup.py README.md /src/
COPY app /src/app
COPY migrations /src/migrations
COPY graders /src/graders
COPY reference_kernels /src/reference_kernels
# Nsight Compute for the profiling stage (README, Profiling), from the CUDA apt repository the
# nvidia/cuda base images carry: --build-arg NSIGHT_COMPUTE=nsight-compute-2025.3.1 (about 1 GB;
# empty, the default, leaves it out and the worker says on each page that it does not profile).
# The driver must also let the worker's user read the counters: see compose.gpu.yaml.
ARG NSIGHT_COMPUTE=""
RUN if [ -n "${NSIGHT_COMPUTE}" ]; then apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${NSIGHT_COMPUTE}" \
    && rm -rf /var/lib/apt/lists/*; fi
# The web image's layers first (the same steps, so building both on one base reuses them),
# then the CUDA extra on top (it brings NVIDIA's ncu-report, the profiles' reader).
RUN /opt/kernelgrader/bin/pip install ${PIP_INDEX_OPTS} --find-links /wheels "/src[scale]"
RUN /opt/kernelgrader/bin/pip install ${PIP_INDEX_OPTS} --find-links /wheels "/src[cuda13,scale]"
ENV PATH=/opt/kernelgrader/bin:$PATH
# The sanitizer's native launcher (README, "The processes of one grading"), built here with a C
# compiler the image then drops: --build-arg LAUNCHER_CC=gcc (empty, the default, leaves it to
# the entrypoint's warm-cache, which needs a compiler in the image; without one the tools run
# the Python program).
ARG LAUNCHER_CC=""
RUN if [ -n "${LAUNCHER_CC}" ]; then apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${LAUNCHER_CC}" libc6-dev \
    && mkdir -p /opt/kernelgrader/launcher \
    && "${LAUNCHER_CC}" -O2 -std=c11 -o /opt/kernelgrader/launcher/kg-sanitizer-launcher \
       /src/graders/sanitizer/launcher.c -ldl \
    && apt-get purge -y "${LAUNCHER_CC}" && apt-get autoremove -y && rm -rf /var/lib/apt/lists/*; fi
ENV KERNELGRADER_SANITIZER_LAUNCHER=${LAUNCHER_CC:+/opt/kernelgrader/launcher/kg-sanitizer-launcher}
# Starts as root to ready the shared lock folder and the kernel cache volume, then runs the
# worker as kernelgrader, after building the CuPy kernel cache where a GPU is.
COPY docker/worker-entrypoint.sh /usr/local/bin/kernelgrader-worker-entrypoint
ENTRYPOINT ["/usr/local/bin/kernelgrader-worker-entrypoint"]
CMD ["kernelgrader", "worker"]
