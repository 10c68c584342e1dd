#!/usr/bin/env bash
# The GPU tests and benches, in parts, one after another, each bounded in time, on a GPU host.
#
#   scripts/gpu-suite.sh [PART ...]     # default: every part, in this order
#
# Parts: core (tests/graders/gpu's engine tests and tests/graders/sandbox), labs (every lab's
# references, faulty kernels and lab check), security (tests/security), app (the service's GPU
# tests: the web stack must be importable), pace (bench/throughput.py, matmul-tiled),
# contend (bench/throughput.py with two more services on the GPU), shared (bench/shared_gpu.py).
#
# Each part writes PART.log under $OUT (default ./gpu-results) and a line to summary.txt: its
# exit status, its seconds, and the GPU processes left 15 s after it (there should be none). Parts
# run one at a time, and without pytest-xdist unless told: several test processes on one GPU
# make timing tests and printf floods miss their limits (README, "GPU tests and benchmark").
#
# On a host without a package index, carry the web stack as wheels in .whl/
# (scripts/device_wheels.py) and NVIDIA's ncu-report wheel beside them: they are installed
# first, the web stack into /tmp/kernelgrader-site (on PYTHONPATH for app and the benches only).
# Seconds per part: KERNELGRADER_SUITE_LIMIT_<PART> (defaults below). Test processes per part:
# KERNELGRADER_SUITE_WORKERS_<PART> (pytest-xdist's -n; default one), where device time is short:
# a test that fails beside others is run again alone before it counts.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu-results}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 KERNELGRADER_REQUIRE_NCU="${KERNELGRADER_REQUIRE_NCU:-1}"
PY="${PYTHON:-python3}"
SITE=/tmp/kernelgrader-site
if compgen -G ".whl/*.whl" > /dev/null; then
  for w in .whl/ncu_report-*.whl; do
    [ -e "$w" ] && "$PY" -m pip install -q --no-index --no-deps "$w" > /dev/null 2>&1
  done
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" $(ls .whl/*.whl | grep -v ncu_report) > /dev/null 2>&1 \
    || echo "installing .whl/ into $SITE failed" >> "$OUT/summary.txt"
fi
WEB="$PWD:$SITE${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
G=tests/graders/gpu
PYTEST=("$PY" -m pytest -m gpu -p no:cacheprovider -q -rfEs --tb=short --durations=10)
HAS_TIMEOUT=0  # pytest-timeout installed (the lent GPU hosts have it): a limit per test
"$PY" -c "import pytest_timeout" 2> /dev/null && HAS_TIMEOUT=1

per_test() {  # pytest-timeout's option for one test's limit, where it is installed
  [ "$HAS_TIMEOUT" = 1 ] && echo "--timeout=$1"
}

workers() {  # pytest-xdist processes for a part: KERNELGRADER_SUITE_WORKERS_<PART>, default none
  local name="KERNELGRADER_SUITE_WORKERS_${1^^}"
  [ -n "${!name:-}" ] && echo "-n ${!name}"
}

limit() {  # seconds for a part
  local name="KERNELGRADER_SUITE_LIMIT_${1^^}"
  echo "${!name:-$2}"
}

gpu_processes() {
  nvidia-smi --query-compute-apps=pid --format=csv,noheader 2> /dev/null | wc -l
}

gpu_processes_after() {  # GPU processes still there after up to $1 s: killed ones take a moment
  local n
  for _ in $(seq "$1"); do
    n=$(gpu_processes)
    [ "$n" = 0 ] && break
    sleep 1
  done
  gpu_processes
}

part() {
  local name="$1" seconds="$2"
  shift 2
  local began=$SECONDS
  timeout -k 20 "$seconds" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  local left
  left=$(gpu_processes_after 15)
  local last
  last=$(grep -E "passed|failed|error|skipped" "$OUT/$name.log" | tail -1)
  echo "$name: exit $rc in $((SECONDS - began)) s; GPU processes left: $left; $last" \
    | tee -a "$OUT/summary.txt"
  again "$name"
}

again() {  # with workers, the tests that failed beside others run once more, alone
  local name="$1" failed
  [ -n "$(workers "$name")" ] || return 0
  failed=$(sed -n 's/^FAILED \([^ ]*\).*/\1/p' "$OUT/$name.log" | sort -u)
  [ -n "$failed" ] || return 0
  local began=$SECONDS
  # shellcheck disable=SC2086  # node ids hold no spaces
  timeout -k 20 "$(limit again 240)" env PYTHONPATH="$WEB" "${PYTEST[@]}" $(per_test 200) \
    $failed > "$OUT/$name-alone.log" 2>&1
  local rc=$? last
  last=$(grep -E "passed|failed|error|skipped" "$OUT/$name-alone.log" | tail -1)
  echo "$name, failures again alone: exit $rc in $((SECONDS - began)) s; $last" \
    | tee -a "$OUT/summary.txt"
}

run_part() {
  case "$1" in
    core)
      part core "$(limit core 420)" "${PYTEST[@]}" $(per_test 150) \
        $G/test_timing_trust_gpu.py $G/test_timing_gpu.py $G/test_lock_gpu.py \
        $G/test_leftovers_gpu.py $G/test_kernel_cache_gpu.py $G/test_gpu_probe_gpu.py \
        $G/test_prestart_gpu.py $G/test_hidden_output_gpu.py $G/test_spec_features_gpu.py \
        $G/test_compare_gpu.py $G/test_generate_gpu.py $G/test_profile_gpu.py \
        $G/test_sanitizer_gpu.py $G/test_stack_gpu.py tests/graders/sandbox ;;
    labs)
      part labs "$(limit labs 580)" "${PYTEST[@]}" $(per_test 200) $(workers labs) \
        $G/test_references_gpu.py $G/test_faulty_gpu.py $G/test_lab_check_gpu.py ;;
    security)
      part security "$(limit security 580)" env PYTHONPATH="$WEB" "${PYTEST[@]}" $(per_test 150) \
        $(workers security) \
        --ignore=tests/security/test_http.py --ignore=tests/security/test_openapi_fuzz.py \
        tests/security ;;  # those two hold no GPU test and need the web stack and schemathesis
    app)
      part app "$(limit app 300)" env PYTHONPATH="$WEB" "${PYTEST[@]}" $(per_test 200) \
        tests/app/grading/test_worker_gpu.py tests/app/profiling/test_profile_job_gpu.py ;;
    pace)
      part pace "$(limit pace 400)" env PYTHONPATH="$WEB" "$PY" bench/throughput.py \
        --labs matmul-tiled --sequential 5 --burst 30 --json "$OUT/pace.json" ;;
    contend)
      part contend "$(limit contend 500)" env PYTHONPATH="$WEB" "$PY" bench/throughput.py \
        --labs matmul-naive --submit baseline --sequential 3 --burst 0 --contend 2 \
        --contend-burst 30 --contend-reps 10 --json "$OUT/contend.json" ;;
    shared)
      part shared "$(limit shared 580)" env PYTHONPATH="$WEB" "$PY" bench/shared_gpu.py \
        --services 6 --json "$OUT/shared.json" ;;
    *)
      echo "unknown part: $1 (core, labs, security, app, pace, contend, shared)" >&2
      return 2 ;;
  esac
}

nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv,noheader \
  2> /dev/null | tee -a "$OUT/summary.txt"
"$PY" -m graders warm-cache 2>&1 | tail -1 | tee -a "$OUT/summary.txt"
for p in "${@:-core labs security app pace contend shared}"; do
  for one in $p; do
    run_part "$one" || exit 2
  done
done
