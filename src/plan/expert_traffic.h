// Expert parallelism's traffic, as model/moe.cpp moves it through parallel/expert_parallel.h: in
// each MoE layer's forward every rank tells the ep group how many rows it sends each expert (an
// all-gather of num_experts counts), sends its tokens' N k routed rows (hidden wide, compute dtype)
// to the ranks holding their experts and receives the experts' outputs back: 2 exchanges; the
// backward sends the outputs' gradient out, the experts' inputs again (they are not kept) and the
// inputs' gradient back: 3 exchanges. A rank keeps 1/ep of its rows (those routed to its own
// experts), so (ep - 1)/ep of them cross the link, priced as collectives.h all_to_all on the link
// the ep group crosses (axis_link: intra-node when ep x cp x tp ranks fit in a node). Nothing
// overlaps it (the engine waits for each exchange), and the routing is priced balanced: the
// imbalance factor (PlanInput::moe_imbalance) weighs the expert compute only (time_model.cpp).
#pragma once

#include "plan/plan_input.h"

namespace mt::plan {

// Forward and backward exchanges of rows per MoE layer and pass.
inline constexpr double kExpertExchangesForward = 2.0;
inline constexpr double kExpertExchangesBackward = 3.0;

// One MoE layer's exchanges for one micro-batch on one rank (all zero without ep).
struct ExpertExchange {
  double bytes = 0.0;          // what one exchange sends to other ranks: N k C dtype (ep - 1)/ep
  double seconds = 0.0;        // one exchange on the ep link
  double count_seconds = 0.0;  // the counts' all-gather, once a forward
  bool intra_node = false;     // the ep group's link
};
ExpertExchange expert_exchange(const PlanInput& in);

// A micro-batch's exchanges on a stage: `forward_runs` MoE layer forwards (recomputes included)
// and `backward_runs` MoE layer backwards.
double expert_parallel_seconds(const PlanInput& in, double forward_runs, double backward_runs);

}  // namespace mt::plan
