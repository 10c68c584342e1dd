#!/bin/sh
# The worker image's entrypoint. As root (the image's default), it readies the folders the
# worker shares, then goes on as the worker's user (KERNELGRADER_USER, default kernelgrader):
#   the GPUs' timing locks, /run/lock/kernelgrader (compose mounts the host's, which every
#     worker of the host shares, in a container or not): world-writable with the sticky bit;
#   the CuPy kernel cache, /var/cache/kernelgrader (a volume, so a restart finds it built):
#     the worker user's alone, since every grading loads what is in it.
# Then, where a GPU is, it builds the CuPy kernel cache once (`python -m graders warm-cache`;
# seconds when it is built already), so the worker grades its first submission at once.
set -eu
lock_dir="${KERNELGRADER_LOCK_DIR:-/run/lock/kernelgrader}"
cache_dir="${KERNELGRADER_KERNEL_CACHE_DIR:-/var/cache/kernelgrader}"
user="${KERNELGRADER_USER:-kernelgrader}"
if [ "$(id -u)" -eq 0 ]; then
    mkdir -p "$lock_dir" "$cache_dir"
    chmod 1777 "$lock_dir"
    chown "$user" "$cache_dir"
    chmod 0755 "$cache_dir"
    PATH="$PATH:/usr/sbin:/sbin" exec runuser -u "$user" -- "$0" "$@"
fi
if [ "${KERNELGRADER_RUN_ON_GPU:-true}" != false ] \
        && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    python3 -m graders warm-cache \
        || echo "worker-entrypoint: the CuPy kernel cache was not built here; the worker builds it before it takes jobs." >&2
fi
exec "$@"
