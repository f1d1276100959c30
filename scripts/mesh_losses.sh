# Sourced by the multi-host scripts (two_hosts.sh, slurm_test.sh): per-step losses of a run and
# their comparison with the single-process run.

# The losses of a metrics.jsonl, space-separated.
losses() { sed -n 's/.*"loss":\([-0-9.eE+]*\).*/\1/p' "$1" | tr '\n' ' '; }

# losses_agree WHO STEPS ONE TWO: both lists have STEPS losses and agree to 1e-5 (relative).
losses_agree() {
  awk -v who="$1" -v steps="$2" -v a="$3" -v b="$4" 'BEGIN {
    n = split(a, x, " "); m = split(b, y, " ")
    if (n != steps || m != steps) { print who ": expected " steps " losses each, got: " a " / " b; exit 1 }
    for (i = 1; i <= n; i++) { d = x[i] - y[i]; if (d < 0) d = -d
      if (d > 1e-5 * x[i]) { print who ": losses differ: " a " / " b; exit 1 } }
    print who " gives the single-process losses: " b }'
}
