#include "plan/expert_traffic.h"

#include "plan/collectives.h"

namespace mt::plan {

ExpertExchange expert_exchange(const PlanInput& in) {
  const auto& c = in.model.config;
  const int64_t ep = in.mesh.ep;
  ExpertExchange x;
  if (ep <= 1 || !c.moe()) return x;
  const Link link = axis_link(in.mesh, parallel::Axis::ep, in.cluster);
  x.intra_node = axis_intra_node(in.mesh, parallel::Axis::ep, in.cluster);
  const double act = in.precision == Precision::bf16 ? 2.0 : 4.0;
  // The rank's routed rows, its own ep coordinate's share included (it stays).
  const double rows = double(in.micro_tokens()) * double(c.num_experts_per_tok) * double(c.hidden_size) * act;
  x.bytes = rows * double(ep - 1) / double(ep);
  x.seconds = all_to_all(rows, ep, link);
  // Every rank's count per expert (int64), gathered whole by every rank.
  x.count_seconds = ring_all_gather(8.0 * double(c.num_experts) * double(ep), ep, link);
  return x;
}

double expert_parallel_seconds(const PlanInput& in, double forward_runs, double backward_runs) {
  const ExpertExchange x = expert_exchange(in);
  return forward_runs * (kExpertExchangesForward * x.seconds + x.count_seconds) +
         backward_runs * kExpertExchangesBackward * x.seconds;
}

}  // namespace mt::plan
