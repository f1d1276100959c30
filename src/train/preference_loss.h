// The losses of preference training on chosen/rejected pairs, each as TRL 0.11 computes it
// (DPOTrainer.dpo_loss, CPOTrainer.cpo_loss, ORPOTrainer.odds_ratio_loss), from each sequence's
// completion log-probability: the sum of log p(token) over its completion's tokens, or that sum
// over their count where the loss is length-normalised (IPO, SimPO, ORPO). With c / r the chosen /
// rejected sequence's, pc / pr the policy's and rc / rr the reference model's:
//   sigmoid (DPO)  z = beta ((pc - pr) - (rc - rr)),  loss = -(1 - ls) logsig(z) - ls logsig(-z)
//   ipo            h = (pc - pr) - (rc - rr) - 1 / (2 beta),  loss = h^2
//   simpo          z = beta (pc - pr) - gamma,  loss = -(1 - ls) logsig(z) - ls logsig(-z)
//                  (+ cpo_alpha x the chosen NLL, TRL's CPO term; 0 by default as in the SimPO paper)
//   orpo           o = (pc - pr) - (log(1 - e^pc) - log(1 - e^pr)),  loss = -beta logsig(o)
//                  (+ the chosen NLL)
// ls: label_smoothing. Each pair's loss is averaged over the step's pairs; the chosen NLL is the
// mean loss over every chosen completion token of the step (TRL's cross-entropy over the batch's
// chosen labels). The step is one batch: TRL on one device with its whole batch at once.
// Rewards (TRL's logged rewards/chosen, rewards/rejected): beta (p - ref) with a reference, beta p
// without.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mt {

enum class PreferenceLoss { kSigmoid, kIpo, kSimpo, kOrpo };
// "sigmoid" (also "dpo"), "ipo", "simpo", "orpo"; mt::Error listing them.
PreferenceLoss parse_preference_loss(std::string_view name);
std::string_view preference_loss_name(PreferenceLoss loss);
// Whether the loss compares with a reference model (sigmoid, ipo): SimPO and ORPO need none.
bool needs_reference(PreferenceLoss loss);
// Whether the loss reads each sequence's mean log-probability per completion token (ipo, simpo,
// orpo) rather than the sum (sigmoid).
bool length_normalised(PreferenceLoss loss);

struct PreferenceLossConfig {
  PreferenceLoss loss = PreferenceLoss::kSigmoid;
  double beta = 0.1;             // TRL's beta (ORPO's lambda; IPO's tau)
  double label_smoothing = 0.0;  // sigmoid and simpo (TRL's conservative DPO)
  double simpo_gamma = 0.5;      // simpo's target margin
  double cpo_alpha = 0.0;        // simpo: weight of the chosen NLL (TRL's CPOConfig.cpo_alpha)
};

// One sequence's completion: the sum of its tokens' log-probabilities and how many there are.
struct CompletionLogp {
  double sum = 0.0;
  int64_t tokens = 0;
};

// What TRL logs of a batch of pairs (means over its pairs): rewards/chosen, rewards/rejected,
// rewards/accuracies, rewards/margins, logps/chosen, logps/rejected (the loss's own log-probs:
// sums, or means per token where length-normalised), and the chosen NLL (nll_loss) where the loss
// adds it.
struct PreferenceMetrics {
  double rewards_chosen = 0.0, rewards_rejected = 0.0, accuracy = 0.0, margin = 0.0;
  double logps_chosen = 0.0, logps_rejected = 0.0, nll = 0.0;
  int64_t pairs = 0;
};

struct PreferenceResult {
  double loss = 0.0;  // the mean over the pairs (+ the NLL term)
  // d loss / d sum of each sequence's completion log-probabilities: [2 pairs], the chosen of pair
  // p at 2p, its rejected at 2p + 1 (what scales each token's loss gradient).
  std::vector<double> dsum;
  PreferenceMetrics metrics;
};

// `policy` and `reference` hold 2 x pairs sequences, the chosen of pair p at 2p and its rejected at
// 2p + 1; `reference` is empty for a loss that needs none (its token counts are ignored). A
// sequence without completion tokens is an mt::Error (the data never makes one).
PreferenceResult preference_loss(const PreferenceLossConfig& config,
                                 std::span<const CompletionLogp> policy,
                                 std::span<const CompletionLogp> reference);

}  // namespace mt
