#include "train/preference_step.h"

#include <cmath>
#include <string>

#include "core/error.h"
#include "core/profile.h"

namespace mt {

std::vector<CompletionLogp> completion_logps(const std::vector<ModelInput>& micro, int64_t rows,
                                             bool adapters_off, bool holds_loss, GradientSync* sync,
                                             const ForwardPass& forward) {
  // Per row: the sum of its counted tokens' log-probabilities and their count.
  std::vector<double> sums(size_t(2 * rows), 0.0);
  std::vector<float> losses;
  for (const ModelInput& in : micro) {
    const int64_t N = in.B * in.T;
    losses.assign(size_t(N), 0.0f);
    ModelInput f = in;
    f.token_losses = losses.data();
    f.token_weights = nullptr;
    if (adapters_off) f.adapters_off = true, f.noise.on = false;  // the reference has no dropout
    forward(f);
    if (!holds_loss) continue;  // its forward computed no token's loss: zeros in the sum
    for (int64_t r = 0; r < in.B; ++r) {
      const int64_t g = in.noise.first_row + r;
      MT_CHECK(0 <= g && g < rows, "a micro-batch's row outside the step's rows");
      for (int64_t t = r * in.T; t < (r + 1) * in.T; ++t)
        if (in.targets[t] >= 0) sums[size_t(2 * g)] -= double(losses[size_t(t)]), sums[size_t(2 * g + 1)] += 1.0;
    }
  }
  if (sync) sync->sum_losses(sums.data(), int64_t(sums.size()));
  std::vector<CompletionLogp> out(static_cast<size_t>(rows));
  for (int64_t g = 0; g < rows; ++g) out[size_t(g)] = {sums[size_t(2 * g)], std::llround(sums[size_t(2 * g + 1)])};
  return out;
}

PreferenceLossConfig preference_loss_config(const RunConfig& cfg) {
  const PreferenceConfig& p = cfg.preference;
  return {parse_preference_loss(cfg.train.method), p.beta, p.label_smoothing, p.simpo_gamma, p.cpo_alpha};
}

PreferenceResult pairs_loss(PreferenceData& data, const std::function<bool(PackedBatch&)>& next,
                            const PreferenceLossConfig& loss, ReferenceSource source,
                            std::span<const CompletionLogp> stored, const BatchLogps& logps) {
  std::vector<CompletionLogp> policy, ref;
  const auto append = [](std::vector<CompletionLogp>& to, const std::vector<CompletionLogp>& from) {
    to.insert(to.end(), from.begin(), from.end());
  };
  for (PackedBatch b; next(b);) {
    append(policy, logps(b, false));
    if (source == ReferenceSource::kAdaptersOff) append(ref, logps(b, true));
    if (source == ReferenceSource::kGiven)
      for (int64_t id : data.last_sequences()) ref.push_back(stored[size_t(id)]);
  }
  if (policy.empty()) return {std::nan(""), {}, {}};
  return preference_loss(loss, policy, needs_reference(loss.loss) ? std::span<const CompletionLogp>(ref)
                                                                  : std::span<const CompletionLogp>());
}

StepResult preference_step(Transformer& model, AdamW& optimizer, const std::vector<ModelInput>& micro,
                           int64_t rows, const PreferenceSetup& setup, std::span<const CompletionLogp> given,
                           const OptimConfig& cfg, int64_t step, float lr, GradientSync* sync,
                           const RunMicroBatches& run, const ForwardPass& forward) {
  MT_CHECK(rows % 2 == 0, "preference step: rows come in pairs");
  std::vector<CompletionLogp> policy, reference;
  {
    MT_PROFILE("preference forwards");
    policy = completion_logps(micro, rows, false, setup.holds_loss, sync, forward);
    if (setup.reference == ReferenceSource::kAdaptersOff)
      reference = completion_logps(micro, rows, true, setup.holds_loss, sync, forward);
  }
  std::span<const CompletionLogp> ref = reference;
  if (setup.reference == ReferenceSource::kGiven) {
    MT_CHECK(int64_t(given.size()) == rows, "preference step: a given reference for every row");
    ref = given;
  }
  if (!needs_reference(setup.loss.loss)) ref = {};
  const PreferenceResult pr = preference_loss(setup.loss, policy, ref);
  if (!std::isfinite(pr.loss)) fail("preference loss is not finite at step " + std::to_string(step + 1));

  // Each token's loss is -log p: its gradient weight is -d loss / d log p(sequence).
  std::vector<std::vector<float>> weights(micro.size());
  std::vector<ModelInput> weighted = micro;
  for (size_t k = 0; k < micro.size(); ++k) {
    const ModelInput& in = micro[k];
    weights[k].resize(size_t(in.B * in.T));
    for (int64_t r = 0; r < in.B; ++r) {
      const float w = float(-pr.dsum[size_t(in.noise.first_row + r)]);
      std::fill(weights[k].begin() + r * in.T, weights[k].begin() + (r + 1) * in.T, w);
    }
    weighted[k].token_weights = weights[k].data();
  }
  StepResult r;
  run_backward(model, optimizer, weighted, 1.0f, sync, run, r);
  r.loss = pr.loss;
  r.preference = pr.metrics;
  for (const CompletionLogp& s : policy) r.counted_tokens += s.tokens;
  apply_update(optimizer, cfg, lr, sync, r);
  return r;
}

}  // namespace mt
