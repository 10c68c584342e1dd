# The web service (pages + API). No CUDA here: the web process never runs student code.
# Build from the repository root: docker build -f docker/web.Dockerfile -t kernelgrader-web .
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /srv/kernelgrader

RUN useradd --create-home --uid 10001 kernelgrader
COPY pyproject.toml README.md alembic.ini ./
COPY app ./app
COPY graders ./graders
COPY reference_kernels ./reference_kernels
COPY migrations ./migrations
# No CUDA extras: the web process reads lab specs but never compiles or runs kernels.
RUN pip install ".[scale]"

USER kernelgrader
ENV KERNELGRADER_DATA_DIR=/var/lib/kernelgrader
EXPOSE 8000
# Migrate, then serve; the workers run in their own containers (--no-local-worker).
CMD ["sh", "-c", "kernelgrader db upgrade && kernelgrader serve --host 0.0.0.0 --port 8000 --no-local-worker"]
