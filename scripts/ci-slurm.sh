#!/usr/bin/env bash
# A single-node Slurm on this host for the fleet's Slurm tests (tests/app/fleet/test_slurm_*.py)
# and bench/deadline_fleet.py: Debian's slurm-wlm and munge, installed with apt-get, a munged,
# a slurmctld and a slurmd of their own (own key, socket, ports, state and spool folders under
# one folder), so nothing of a Slurm or munge already on the host is read or changed.
#
# The node declares 8 CPUs, 8000 MB and 4 GPUs as GRES (empty files for devices), and the feature
# "kgci": jobs asking `--gres=gpu:1 --constraint=kgci` run here, and their workers, finding no
# GPU, compile only (status `compiled`), as a local worker without a GPU does.
#
#   scripts/ci-slurm.sh          install, configure and start (safe to run again: starts only
#                                what is not running); stdout gets exactly the lines the tests
#                                read, progress goes to stderr:
#                                  KERNELGRADER_TEST_SLURM_CONF=<folder>/slurm.conf
#                                  KERNELGRADER_TEST_SLURM_PARTITION=kgci
#                                  KERNELGRADER_TEST_SLURM_CONSTRAINT=kgci
#   scripts/ci-slurm.sh stop     stop the daemons this script started, by the pids they wrote
#
# Runs as root on Debian or Ubuntu. It exports nothing itself; the caller does (.ci/run).
set -euo pipefail

dir="${KERNELGRADER_CI_SLURM_DIR:-/var/lib/kernelgrader-ci-slurm}"
ctld_port="${KERNELGRADER_CI_SLURMCTLD_PORT:-16817}"
slurmd_port="${KERNELGRADER_CI_SLURMD_PORT:-16818}"
partition=kgci
conf="$dir/slurm.conf"

say() { printf 'ci-slurm: %s\n' "$*" >&2; }

# The pid a daemon wrote, if that process still runs.
running_pid() {
    local file="$1" pid
    [ -s "$file" ] || return 1
    pid="$(tr -dc '0-9' < "$file")"
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && printf '%s' "$pid"
}

stop_one() {
    local name="$1" file="$2" pid
    pid="$(running_pid "$file")" || return 0
    say "stopping $name (pid $pid)"
    kill -TERM "$pid"
    for _ in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    say "$name (pid $pid) still runs 10 s after SIGTERM; killing it"
    kill -KILL "$pid" 2>/dev/null || true
}

if [ "${1:-start}" = "stop" ]; then
    stop_one slurmd "$dir/slurmd.pid"
    stop_one slurmctld "$dir/slurmctld.pid"
    stop_one munged "$dir/munge/munged.pid"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    say "run this as root: it installs packages with apt-get and starts Slurm's daemons."
    exit 1
fi

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
    || ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
    say "installing slurm-wlm and munge with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends slurm-wlm munge >&2
fi

host="$(hostname -s)"
mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
chmod 0755 "$dir"

# munge: a key and a socket of this folder's own. munged insists that its folders belong to
# its user and that no one else may write them.
chown munge:munge "$dir/munge"
# Searchable by all (munged requires it of its socket's folder, and Slurm reaches the socket),
# listable and writable by munge alone.
chmod 0711 "$dir/munge"
if [ ! -s "$dir/munge/munge.key" ]; then
    say "making a munge key"
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1 count=1024 status=none
    chown munge:munge "$dir/munge/munge.key"
    chmod 0400 "$dir/munge/munge.key"
fi
socket="$dir/munge/munge.socket"
if ! running_pid "$dir/munge/munged.pid" >/dev/null; then
    say "starting munged (socket $socket)"
    runuser -u munge -- munged --socket="$socket" --key-file="$dir/munge/munge.key" \
        --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
        --seed-file="$dir/munge/munged.seed" >&2
fi
for _ in $(seq 50); do
    munge --socket="$socket" -n </dev/null | unmunge --socket="$socket" >/dev/null 2>&1 && break
    sleep 0.1
done
if ! munge --socket="$socket" -n </dev/null | unmunge --socket="$socket" >/dev/null 2>&1; then
    say "munged does not answer on $socket; see $dir/munge/munged.log"
    exit 1
fi

cat > "$conf.new" <<EOF
# Written by scripts/ci-slurm.sh: one node, this host, for the fleet's tests.
ClusterName=kgci
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
# No cgroups in a CI container: a job's processes are tracked by process group, and tasks are
# not bound. Not linuxproc: it misses a process whose name holds a space, as a Celery worker's
# "[celeryd: ..." does, and then neither scancel nor a time limit stops the worker (seen with
# Slurm 22.05).
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# The node below is larger than this machine; take it as written.
SlurmdParameters=config_overrides
ReturnToService=2
# Ended jobs stay listed by squeue --states=all for this long (the fleet reads why they ended).
MinJobAge=600
KillWait=10
GresTypes=gpu
NodeName=$host NodeAddr=127.0.0.1 CPUs=8 RealMemory=8000 Gres=gpu:4 Feature=kgci State=UNKNOWN
PartitionName=$partition Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
# Slurm keeps only GPUs that name a character device; these links to /dev/null stand in for
# /dev/nvidia0..3 (there is no GPU here, and with task/none nothing is confined to them).
for n in 0 1 2 3; do
    ln -sfn /dev/null "$dir/gpu$n"
done
printf 'NodeName=%s Name=gpu File=%s/gpu[0-3]\n' "$host" "$dir" > "$dir/gres.conf.new"
changed=0
for file in slurm.conf gres.conf; do
    if ! cmp -s "$dir/$file.new" "$dir/$file"; then
        mv "$dir/$file.new" "$dir/$file"
        changed=1
    else
        rm -f "$dir/$file.new"
    fi
done
export SLURM_CONF="$conf"
if [ "$changed" = 1 ]; then
    # A configuration written anew: daemons started with the old one go first.
    stop_one slurmd "$dir/slurmd.pid"
    stop_one slurmctld "$dir/slurmctld.pid"
fi

if ! running_pid "$dir/slurmctld.pid" >/dev/null; then
    say "starting slurmctld (port $ctld_port)"
    # -c: nothing of an earlier run (its jobs, a node it drained) carries over.
    slurmctld -f "$conf" -c >&2
fi
if ! running_pid "$dir/slurmd.pid" >/dev/null; then
    say "starting slurmd for node $host (port $slurmd_port)"
    slurmd -f "$conf" >&2
fi

# Up once the node takes jobs.
for _ in $(seq 150); do
    state="$(sinfo -h -n "$host" -o '%T' 2>/dev/null || true)"
    case "$state" in
        idle*|mixed*|allocated*) break ;;
    esac
    sleep 0.2
done
state="$(sinfo -h -n "$host" -o '%T' 2>/dev/null || true)"
case "$state" in
    idle*|mixed*|allocated*) ;;
    *)
        say "node $host is '${state:-not listed}' 30 s after start; see $dir/slurmctld.log and $dir/slurmd.log"
        exit 1
        ;;
esac

say "Slurm is up: partition $partition on node $host ($state)"
echo "KERNELGRADER_TEST_SLURM_CONF=$conf"
echo "KERNELGRADER_TEST_SLURM_PARTITION=$partition"
echo "KERNELGRADER_TEST_SLURM_CONSTRAINT=kgci"
