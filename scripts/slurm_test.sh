#!/usr/bin/env bash
# Trains under a real SLURM: munged, slurmctld and two slurmd ("n1" and "n2", each in its own
# network and UTS namespace joined by a veth pair, as in two_hosts.sh) started here from a
# throwaway slurm.conf, then
#   srun --mpi=pmix -N 2 -n 2                        --mesh dp=2       (one rank per node)
#   srun --mpi=pmix -N 2 -n 4 --distribution=cyclic  --mesh fsdp=2,tp=2 (ranks alternate nodes)
#   salloc -N 2 -n 2 mpirun                          --mesh dp=2       (mpirun inside an allocation)
# each compared with the single-process losses, and the ranks, nodes and local ranks meshtrain
# reports compared with where SLURM put the tasks. srun without --mpi=pmix must fail, not train.
# A run stopped by scancel --signal=USR1 checkpoints, exits 3 and resumes with its printed command.
# Needs root (namespaces, daemons) and slurm-wlm, munge, mpirun; exits 77 (skipped) without them.
# Every daemon is stopped on exit; traffic stays inside the two namespaces this script creates.
#
#   scripts/slurm_test.sh [path/to/meshtrain]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
MT=$(realpath "${1:-build/meshtrain}")
for tool in ip nsenter unshare munged slurmctld slurmd srun salloc sinfo mpirun; do
  command -v "$tool" >/dev/null || { echo "slurm_test: $tool not found; skipped"; exit 77; }
done
[ "$(id -u)" -eq 0 ] || { echo "slurm_test: needs root; skipped"; exit 77; }

tag=ms$$
h1=${tag}a h2=${tag}b ip1=10.78.$(( $$ % 200 )).1 ip2=10.78.$(( $$ % 200 )).2
work=$(mktemp -d)
chmod 755 "$work"  # munged refuses a socket whose directories others cannot reach
# Ends what this script started: everything inside its two namespaces (slurmctld, the slurmds,
# their steps), then munged; a daemon still there after 10 s is killed. After a failure the
# daemons' logs say why.
cleanup() {
  local rc=$? pids=()
  [ $rc -eq 0 ] || tail -n 15 "$work"/*.log >&2 2>/dev/null || true
  for ns in "$h1" "$h2"; do
    [ -e "/run/netns/$ns" ] && pids+=($(ip netns pids "$ns" 2>/dev/null))
  done
  [ -f "$work/munged.pid" ] && pids+=("$(cat "$work/munged.pid")")
  if [ ${#pids[@]} -gt 0 ]; then
    kill "${pids[@]}" 2>/dev/null || true
    for _ in $(seq 1 20); do
      kill -0 "${pids[@]}" 2>/dev/null || break
      sleep 0.5
    done
    kill -9 "${pids[@]}" 2>/dev/null || true
  fi
  ip netns del "$h1" 2>/dev/null || true
  ip netns del "$h2" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

source scripts/netns_pair.sh
netns_pair "$h1" "$h2" "$ip1" "$ip2" "$tag"
# nsenter enters only the network namespace: `ip netns exec` would also remount /sys, hiding the
# cgroup file system slurmd reads at start. A node also gets its own host name, so that OpenMPI's
# shared-memory files (named by host) do not collide between the two nodes; it differs from the
# node's SLURM name, so the node names meshtrain prints can only have come from SLURM.
in1=(nsenter --net="/run/netns/$h1")
on_node() {  # on_node NS NAME COMMAND...: COMMAND on a "host" called NAME
  local ns=$1 name=$2; shift 2
  nsenter --net="/run/netns/$ns" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$name" "$@"
}

mkdir -p "$work/munge" "$work/state" "$work/spool/n1" "$work/spool/n2" "$work/tmp/n1" "$work/tmp/n2"
head -c 1024 /dev/urandom > "$work/munge/key" && chmod 400 "$work/munge/key"
munged --force --socket="$work/munge/socket" --key-file="$work/munge/key" \
  --log-file="$work/munged.log" --pid-file="$work/munged.pid" --seed-file="$work/munge/seed"

# One partition of two 2-CPU nodes; no cgroups (proctrack/linuxproc, task/none), no accounting.
# TmpFS is per node because the two share one /tmp: srun's PMIx server makes its directory there.
cat > "$work/slurm.conf" <<CONF
ClusterName=meshtrain
SlurmctldHost=$(hostname -s)($ip1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$work/munge/socket
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool/%n
TmpFS=$work/tmp/%n
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd-%n.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd-%n.log
NodeName=n1 NodeAddr=$ip1 CPUs=2 State=UNKNOWN
NodeName=n2 NodeAddr=$ip2 CPUs=2 State=UNKNOWN
PartitionName=mt Nodes=n1,n2 Default=YES MaxTime=10 State=UP
CONF
export SLURM_CONF=$work/slurm.conf
"${in1[@]}" slurmctld -i
on_node "$h1" host1 slurmd -N n1
on_node "$h2" host2 slurmd -N n2
for i in $(seq 1 60); do
  [ "$("${in1[@]}" sinfo -h -o '%T %D' 2>/dev/null)" = "idle 2" ] && break
  [ "$i" -lt 60 ] || { echo "slurm_test: the two nodes did not come up in 30 s" >&2; exit 1; }
  sleep 0.5
done
echo "slurm_test: slurmctld and slurmd n1, n2 up ($(srun --version))"

source scripts/mesh_losses.sh
export OMP_NUM_THREADS=1  # srun and mpirun pass the environment on to every rank
args=(train --set train.steps=5 --set train.precision=fp32 --set train.peak_gflops=100
      --set train.seq_len=64 --set train.log_every=100)
"$MT" "${args[@]}" --set output.dir="$work/one" >/dev/null
one=$(losses "$work/one/metrics.jsonl")

# run NAME WORLD_LINE LAUNCH... -- MESH: trains under LAUNCH, then checks the losses and the
# "world:" line meshtrain prints (rank, node and local rank of every rank).
run() {
  local name=$1 want=$2; shift 2
  local launch=() mesh
  while [ "$1" != "--" ]; do launch+=("$1"); shift; done
  mesh=$2
  timeout 180 "${in1[@]}" "${launch[@]}" "$MT" "${args[@]}" --mesh "$mesh" \
    --set output.dir="$work/$name" > "$work/$name.out"
  local got
  got=$(sed -n 's/^world: //p' "$work/$name.out")
  [ "$got" = "$want" ] || { echo "slurm_test: $name: expected world: $want"$'\n'"got: $got" >&2; exit 1; }
  losses_agree "slurm_test: $name ($got)" 5 "$one" "$(losses "$work/$name/metrics.jsonl")"
}
by_srun="placed by srun (SLURM_PROCID, SLURM_STEP_NUM_TASKS)"
run srun_dp "2 ranks on 2 nodes, $by_srun: n1 runs rank 0 (local 0); n2 runs rank 1 (local 0)" \
  srun --mpi=pmix -N 2 -n 2 -- dp=2
run srun_cyclic "4 ranks on 2 nodes, $by_srun: n1 runs ranks 0,2 (local 0,1); n2 runs ranks 1,3 (local 0,1)" \
  srun --mpi=pmix -N 2 -n 4 --distribution=cyclic -- fsdp=2,tp=2
run salloc_mpirun "2 ranks on 2 nodes, placed by mpirun (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE): n1 runs rank 0 (local 0); n2 runs rank 1 (local 0)" \
  salloc -N 2 -n 2 mpirun --allow-run-as-root -- dp=2

# A graceful stop under SLURM: scancel --signal=USR1 to the running job step (what --signal sends
# before the time limit) must end every rank after the same step with a checkpoint and exit 3; the
# resume command meshtrain prints, run under srun, must finish the run with the single-process
# losses of all its steps.
stop_args=(train --set train.steps=30 --set train.precision=fp32 --set train.peak_gflops=100
           --set train.seq_len=64 --set train.log_every=100)
"$MT" "${stop_args[@]}" --set output.dir="$work/stop_one" >/dev/null
timeout 180 "${in1[@]}" srun --mpi=pmix -N 2 -n 2 -J mtstop "$MT" "${stop_args[@]}" --mesh dp=2 \
  --set output.dir="$work/stop" > "$work/stop.out" 2>&1 &
stopped=$!
for i in $(seq 1 600); do  # until the run has logged 3 steps
  [ "$(cat "$work/stop/metrics.jsonl" 2>/dev/null | wc -l)" -ge 3 ] && break
  [ "$i" -lt 600 ] || { echo "slurm_test: the run to stop logged no steps in 60 s" >&2; exit 1; }
  sleep 0.1
done
job=$("${in1[@]}" squeue -h -n mtstop -o %i)
"${in1[@]}" scancel --signal=USR1 "$job"
rc=0; wait "$stopped" || rc=$?
[ "$rc" -eq 3 ] || { echo "slurm_test: scancel --signal=USR1: srun exited $rc, expected 3 (stopped)" >&2; cat "$work/stop.out" >&2; exit 1; }
resume=$(sed -n 's/^stopped: SIGUSR1 after step [0-9]* of 30, checkpoint .*; resume with: //p' "$work/stop.out")
case "$resume" in
  "srun -n 2 meshtrain train "*) ;;
  *) echo "slurm_test: no resume command for srun in the stop's output:" >&2; cat "$work/stop.out" >&2; exit 1 ;;
esac
echo "slurm_test: scancel --signal=USR1 stopped the run: $(grep -m1 '^stopped:' "$work/stop.out" | cut -d, -f1)"
# The printed command, with srun's options of this cluster (PMIx, both nodes) and this binary.
timeout 180 "${in1[@]}" ${resume/#srun -n 2 meshtrain/srun --mpi=pmix -N 2 -n 2 $MT} > "$work/stop_resumed.out" 2>&1 ||
  { echo "slurm_test: the printed resume command failed:" >&2; cat "$work/stop_resumed.out" >&2; exit 1; }
losses_agree "slurm_test: stopped by scancel --signal=USR1 and resumed" 30 \
  "$(losses "$work/stop_one/metrics.jsonl")" "$(losses "$work/stop/metrics.jsonl")"

# Without PMIx the tasks cannot form one MPI world: that must end the step with an error, never
# two single-process runs writing one output directory.
if timeout 120 "${in1[@]}" srun -N 2 -n 2 "$MT" "${args[@]}" --mesh dp=2 \
     --set output.dir="$work/no_pmix" > "$work/no_pmix.out" 2>&1; then
  echo "slurm_test: srun without --mpi=pmix trained instead of failing" >&2; exit 1
fi
[ ! -e "$work/no_pmix/metrics.jsonl" ] || { echo "slurm_test: srun without --mpi=pmix wrote metrics" >&2; exit 1; }
why=$(grep -m1 'launched using' "$work/no_pmix.out" || grep -m1 error "$work/no_pmix.out" || true)
echo "slurm_test: srun without --mpi=pmix fails: $why"
