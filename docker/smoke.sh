#!/usr/bin/env bash
# The README's "Larger setup" with Docker, run for real on this machine: build the images,
# start PostgreSQL, Redis, the web service and a compile-only worker from compose.yaml, upload
# a kernel, wait for `compiled`, export the gradebook, then stop and remove everything it
# started. Here Docker Hub and package indexes are out of reach, so compose.local.yaml builds
# every image on a Debian base made from Debian's packages (base-image.sh), installs Python
# packages from wheels the host's pip provides (docker/wheels), and uses host networking.
#
# Run as root on Debian/Ubuntu: it installs docker.io, docker-compose and debootstrap where
# missing and starts dockerd if none runs (stopped again at the end). Elsewhere it needs a
# Docker engine it may use. Ports: KERNELGRADER_SMOKE_{WEB,PG,REDIS}_PORT (58000, 55432, 56379).
# `docker/smoke.sh --tools` only installs what is missing (docker.io, docker-compose, debootstrap).
set -euo pipefail
cd "$(dirname "$0")"
started=$SECONDS
say() { printf 'smoke: %s\n' "$*" >&2; }
fail() { say "FAILED: $*"; exit 1; }
phase() { say "$1 ($((SECONDS - started)) s)"; }
is_root() { [ "$(id -u)" -eq 0 ]; }

# --- a Docker engine and compose --------------------------------------------------------
apt_install() {
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends "$@" >&2
}
engine_up() { command -v docker >/dev/null && timeout 20 docker info >/dev/null 2>&1; }
missing=()
# A Docker client alone (as on some CI images) needs Debian's engine beside it.
if ! command -v docker >/dev/null || { ! engine_up && ! command -v dockerd >/dev/null; }; then
    missing+=(docker.io)
fi
docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null \
    || missing+=(docker-compose)
command -v debootstrap >/dev/null || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
    is_root || fail "${missing[*]} missing, and installing them needs root: install Docker with compose and debootstrap, or run docker/smoke.sh as root."
    phase "installing ${missing[*]} from Debian's packages"
    apt_install "${missing[@]}" || fail "apt-get could not install ${missing[*]}."
fi
if [ "${1:-}" = --tools ]; then
    # .ci/run: Docker's tools in place before the tests, which run the refusals above as nobody.
    say "Docker's tools are installed: $(command -v docker) $(command -v dockerd) $(command -v debootstrap)"
    exit 0
fi
dockerd_pid=""
if ! engine_up; then
    is_root || fail "no Docker engine answers (docker info failed), and starting one needs root: start Docker (or join the docker group), or run docker/smoke.sh as root."
    command -v dockerd >/dev/null || fail "dockerd is missing; install docker.io."
    phase "starting dockerd (no bridge network: the smoke test uses host networking)"
    setsid dockerd --iptables=false --ip6tables=false --bridge=none \
        >/tmp/kernelgrader-smoke-dockerd.log 2>&1 &
    dockerd_pid=$!
    for _ in $(seq 60); do timeout 5 docker info >/dev/null 2>&1 && break; sleep 0.5; done
    timeout 5 docker info >/dev/null 2>&1 \
        || fail "dockerd did not answer within 30 s; see /tmp/kernelgrader-smoke-dockerd.log."
fi
if docker compose version >/dev/null 2>&1; then
    docker() { if [ "$1" = compose ]; then shift; command docker compose "$@"; else command docker "$@"; fi; }
else
    # Debian bookworm packs compose v1; the README's `docker compose ...` runs as `docker-compose ...`.
    docker() { if [ "$1" = compose ]; then shift; docker-compose "$@"; else command docker "$@"; fi; }
fi

# --- what compose.local.yaml needs: the base image and the wheels -----------------------
export KERNELGRADER_BASE_IMAGE="${KERNELGRADER_BASE_IMAGE:-kernelgrader/debian:bookworm}"
phase "base image $KERNELGRADER_BASE_IMAGE"
./base-image.sh "$KERNELGRADER_BASE_IMAGE"
python="${PYTHON:-python3}"
host_py="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
image_py="$(command docker run --rm --network none "$KERNELGRADER_BASE_IMAGE" \
    python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
[ "$host_py" = "$image_py" ] || fail "the wheels come from this host's Python $host_py, but $KERNELGRADER_BASE_IMAGE has Python $image_py; set PYTHON to a python$image_py."
phase "wheels for Python $host_py into docker/wheels (the host's pip and its cache)"
# async-timeout: redis needs it below Python 3.11.3 (Debian bookworm has 3.11.2), a marker
# that this host's newer 3.11 does not meet, so its pip would leave it out.
if ! "$python" -m pip wheel -q --wheel-dir wheels "setuptools>=69" wheel "async-timeout>=4.0.3" \
        "..[cuda13,scale]" >/tmp/kernelgrader-smoke-wheels.log 2>&1; then
    tail -n 20 /tmp/kernelgrader-smoke-wheels.log >&2
    fail "pip could not provide the wheels; the whole log is in /tmp/kernelgrader-smoke-wheels.log."
fi
rm -f wheels/kernelgrader-*.whl  # the images install the package from its sources

# --- the README's "Larger setup", with the local override -------------------------------
export COMPOSE_FILE=compose.yaml:compose.local.yaml COMPOSE_PROJECT_NAME=kernelgrader-smoke
KG="http://127.0.0.1:${KERNELGRADER_SMOKE_WEB_PORT:-58000}"
cleanup() {
    code=$?
    set +e
    if [ $code -ne 0 ]; then
        say "the services' last log lines:"
        docker compose logs --no-color --tail=25 >&2
    fi
    phase "stopping and removing the containers and volumes"
    docker compose down -v --remove-orphans >/dev/null 2>&1
    if [ -n "$dockerd_pid" ]; then
        kill "$dockerd_pid" 2>/dev/null
        for _ in $(seq 40); do kill -0 "$dockerd_pid" 2>/dev/null || break; sleep 0.5; done
    fi
    say "$([ $code -eq 0 ] && echo passed || echo failed) in $((SECONDS - started)) s"
}
trap cleanup EXIT

[ -f .env ] || printf 'POSTGRES_PASSWORD=%s\nKERNELGRADER_SECRET_KEY=%s\nKERNELGRADER_GRADING_SECRET=%s\nKERNELGRADER_METRICS_TOKEN=%s\n' \
    "$(openssl rand -hex 16)" "$(openssl rand -hex 32)" "$(openssl rand -hex 32)" "$(openssl rand -hex 32)" > .env
phase "docker compose build"
docker compose build >/tmp/kernelgrader-smoke-build.log 2>&1 \
    || { tail -n 40 /tmp/kernelgrader-smoke-build.log >&2; fail "the images did not build (log: /tmp/kernelgrader-smoke-build.log)."; }
phase "docker compose up -d"
docker compose up -d
for _ in $(seq 120); do curl -sf "$KG/api/v1/health" >/dev/null && break; sleep 1; done
curl -s "$KG/api/v1/health" >/dev/null || fail "the web service did not answer on $KG within 120 s."
phase "the web service answers on $KG"

json() { "$python" -c "import json, sys; print($1)"; }
set +o pipefail  # the README's line, whose grep finds nothing when the start printed no token
TOKEN="$(docker compose logs --no-color web | grep -o 'kg_[A-Za-z0-9_-]*' | tail -n 1)"   # the first start's API token
set -o pipefail
[ -n "$TOKEN" ] || fail "the web service's first start printed no API token."
work="$(mktemp -d)"
cat >"$work/scale.cu" <<'CUDA'
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = factor * src[i];
}
CUDA
cd "$work"
submitted="$(curl -s -H "Authorization: Bearer $TOKEN" -F file=@scale.cu "$KG/api/v1/courses/demo/labs/vector-scale/submissions")"
cd - >/dev/null
rm -rf "$work"
id="$(printf '%s' "$submitted" | json 'json.load(sys.stdin)["id"]')" \
    || fail "the upload was not accepted: $submitted"
say "uploaded submission $id: $submitted"
status=""
for _ in $(seq 120); do
    detail="$(curl -s -H "Authorization: Bearer $TOKEN" "$KG/api/v1/submissions/$id")"
    status="$(printf '%s' "$detail" | json 'json.load(sys.stdin)["status"]')"
    case "$status" in queued|compiling) sleep 1 ;; *) break ;; esac
done
[ "$status" = compiled ] || fail "submission $id ended as '$status', not 'compiled': $detail"
say "submission $id: $(printf '%s' "$detail" | json 'json.load(sys.stdin)["status_message"]')"
phase "compiled by the worker container"

health="$(curl -s "$KG/api/v1/health")"
printf '%s' "$health" | json '[w for w in json.load(sys.stdin)["workers"] if w["alive"] and w["compile"]][0]["arch"]' >/dev/null \
    || fail "/api/v1/health lists no live worker that compiles: $health"
say "health: $health"
book="$(docker compose exec -T web kernelgrader gradebook export demo)"
case "${book%%$'\n'*}" in
    student_id,name,email,*vector-scale*) ;;
    *) fail "the gradebook export is not the demo course's: ${book%%$'\n'*}" ;;
esac
curl -sf -H "Authorization: Bearer $TOKEN" "$KG/api/v1/courses/demo/gradebook.csv" >/dev/null \
    || fail "the gradebook CSV could not be downloaded through the API."
phase "gradebook exported (CLI in the web container, and the API)"
metrics_token="$(sed -n 's/^KERNELGRADER_METRICS_TOKEN=//p' .env)"
if [ -n "$metrics_token" ]; then
    metrics="$(curl -sf -H "Authorization: Bearer $metrics_token" "$KG/metrics")" \
        || fail "/metrics did not answer to its token."
    grep -q '^kernelgrader_uploads_total{course="demo"} 1.0$' <<<"$metrics" \
        || fail "/metrics does not count the upload: $(grep uploads <<<"$metrics")"
fi
docker compose exec -T web kernelgrader status >&2
[ "$(docker compose exec -T redis sh -c 'redis-cli -p "$0" config get appendonly | tail -n 1' "${KERNELGRADER_SMOKE_REDIS_PORT:-56379}" | tr -d '\r')" = yes ] \
    || fail "Redis runs without its append-only file: queued jobs would not survive a restart."
phase "metrics, status and Redis persistence checked"
