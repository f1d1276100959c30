#!/usr/bin/env bash
# Runs across two simulated hosts (dp=2, fsdp=2 and tp=2, one rank per host): two network namespaces joined by a veth pair,
# OpenMPI over TCP between them (its daemons started in each namespace by `ip netns exec`), and
# the result compared with the single-process run. Needs root (ip netns) and mpirun; exits 77
# (skipped) without them. Traffic stays inside the two namespaces this script creates.
#
#   scripts/two_hosts.sh [path/to/meshtrain]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
MT=$(realpath "${1:-build/meshtrain}")
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null || ! command -v mpirun >/dev/null; then
  echo "two_hosts: needs root, iproute2 and mpirun; skipped"; exit 77
fi

tag=mt$$
h1=${tag}a h2=${tag}b ip1=10.77.$(( $$ % 200 )).1 ip2=10.77.$(( $$ % 200 )).2
work=$(mktemp -d)
cleanup() { ip netns del "$h1" 2>/dev/null || true; ip netns del "$h2" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

source scripts/netns_pair.sh
netns_pair "$h1" "$h2" "$ip1" "$ip2" "$tag"

# mpirun runs in the first namespace; OpenMPI starts its daemon for the second "host" through
# this agent, which enters the namespace that owns the address.
cat > "$work/agent" <<AGENT
#!/bin/bash
host=\$1; shift
case "\$host" in $ip1) ns=$h1 ;; $ip2) ns=$h2 ;; *) echo "agent: unknown host \$host" >&2; exit 1 ;; esac
exec ip netns exec "\$ns" bash -c "\$*"
AGENT
chmod +x "$work/agent"
launch=(ip netns exec "$h1" env OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe -n 2
        --host "$ip1:1,$ip2:1" --mca plm_rsh_agent "$work/agent" --mca btl tcp,self
        --mca btl_tcp_if_include "$ip1/24" --mca oob_tcp_if_include "$ip1/24")

where=$("${launch[@]}" bash -c 'ip netns identify $$' | sort | tr '\n' ' ')
echo "two_hosts: ranks run in namespaces: $where"
[ "$where" = "$h1 $h2 " ] || { echo "two_hosts: expected one rank in each of $h1 and $h2" >&2; exit 1; }

args=(train --set train.steps=5 --set train.precision=fp32 --set train.peak_gflops=100
      --set train.seq_len=64 --set train.log_every=100)
OMP_NUM_THREADS=1 "$MT" "${args[@]}" --set output.dir="$work/one" >/dev/null
# Per-step losses of each mesh must agree with the single process to 1e-5 (relative).
source scripts/mesh_losses.sh
one=$(losses "$work/one/metrics.jsonl")
for mesh in dp=2 fsdp=2 tp=2; do
  "${launch[@]}" "$MT" "${args[@]}" --mesh $mesh --set output.dir="$work/$mesh" >/dev/null
  losses_agree "two_hosts: $mesh across two namespaces" 5 "$one" "$(losses "$work/$mesh/metrics.jsonl")"
done
