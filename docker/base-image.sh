#!/usr/bin/env bash
# Build a Debian base image from Debian's packages, for machines that cannot pull from Docker
# Hub: debootstrap a minimal bookworm with Python 3, PostgreSQL and Redis, then `docker import`
# it. The Dockerfiles take it as BASE_IMAGE in place of python:3.12-slim or nvidia/cuda, and
# compose.local.yaml runs PostgreSQL and Redis from it in place of postgres:17 and redis:7
# (in one debootstrap they cost about 13 s; built as images of their own, about 40 s).
#   docker/base-image.sh [IMAGE]    (default kernelgrader/debian:bookworm; kept if it exists)
# Needs root, debootstrap and a running Docker engine; KERNELGRADER_DEBIAN_MIRROR picks the
# mirror (default http://deb.debian.org/debian).
set -euo pipefail
image="${1:-kernelgrader/debian:bookworm}"
mirror="${KERNELGRADER_DEBIAN_MIRROR:-http://deb.debian.org/debian}"

say() { printf 'base-image: %s\n' "$*" >&2; }

if docker image inspect "$image" >/dev/null 2>&1; then
    say "$image exists; keeping it (docker rmi $image to rebuild)"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    say "building $image needs root (debootstrap creates device files and chroots); run it as root."
    exit 1
fi
if ! command -v debootstrap >/dev/null; then
    say "debootstrap is missing; install it with: apt-get install debootstrap"
    exit 1
fi
root="$(mktemp -d /var/tmp/kernelgrader-rootfs.XXXXXX)"
trap 'rm -rf "$root"' EXIT
say "debootstrap bookworm (minbase, python3, postgresql, redis-server) into $root"
started=$SECONDS
if ! debootstrap --variant=minbase \
        --include=python3,python3-venv,ca-certificates,postgresql-15,redis-server \
        bookworm "$root" "$mirror" >"$root.log" 2>&1; then
    tail -n 20 "$root.log" >&2
    say "debootstrap failed; the whole log is in $root.log"
    exit 1
fi
rm -f "$root.log"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | docker import \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["/bin/bash"]' \
    - "$image" >/dev/null
say "built $image in $((SECONDS - started)) s"
