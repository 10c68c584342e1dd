# The web service (pages + API). No CUDA here: the web process never runs student code.
# Build from the repository root: docker build -f docker/web.Dockerfile -t kernelgrader-web .
# BASE_IMAGE: any Debian-like image with Python >= 3.11 (python3 and venv are installed with
# apt-get where missing); docker/base-image.sh builds one from Debian's packages. Without an
# index, put wheels in docker/wheels and pass PIP_INDEX_OPTS=--no-index (docker/smoke.sh does).
ARG BASE_IMAGE=python:3.12-slim
FROM ${BASE_IMAGE}
ARG PIP_INDEX_OPTS=""
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONUNBUFFERED=1 \
    KERNELGRADER_DATA_DIR=/var/lib/kernelgrader
RUN python3 -c "import venv, ensurepip" 2>/dev/null || { apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/*; }
RUN python3 -m venv /opt/kernelgrader && useradd --create-home --uid 10001 kernelgrader \
    && mkdir -p /var/lib/kernelgrader && chown kernelgrader /var/lib/kernelgrader
# One stage: with an index, docker/wheels holds only its README; without, its wheels stay in a
# layer of their own, which costs disk but no copy of the installed packages.
COPY docker/wheels/ /wheels/
COPY pyproject.toml setup.py README.md /src/
COPY app /src/app
COPY migrations /src/migrations
COPY graders /src/graders
COPY reference_kernels /src/reference_kernels
# No CUDA extras: the web process reads lab specs but never compiles or runs kernels.
RUN /opt/kernelgrader/bin/pip install ${PIP_INDEX_OPTS} --find-links /wheels "/src[scale]"
ENV PATH=/opt/kernelgrader/bin:$PATH
USER kernelgrader
EXPOSE 8000
# serve migrates the database first; the workers run in their own containers.
CMD ["sh", "-c", "exec kernelgrader serve --host 0.0.0.0 --port ${KERNELGRADER_PORT:-8000} --no-local-worker"]
