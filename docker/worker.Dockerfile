# A GPU grading worker: one container per GPU, started with the NVIDIA container runtime
# (docker run --gpus '"device=0"' ...). CuPy brings its CUDA libraries as wheels; the host
# needs only the NVIDIA driver. Build from the repository root:
#   docker build -f docker/worker.Dockerfile -t kernelgrader-worker .
FROM nvidia/cuda:13.0.1-base-ubuntu24.04

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-pip \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /srv/kernelgrader
RUN python3 -m venv /opt/venv && useradd --create-home --uid 10001 kernelgrader
ENV PATH=/opt/venv/bin:$PATH
COPY pyproject.toml README.md alembic.ini ./
COPY app ./app
COPY graders ./graders
COPY reference_kernels ./reference_kernels
COPY migrations ./migrations
RUN pip install ".[cuda13,scale]"

USER kernelgrader
CMD ["kernelgrader", "worker"]
