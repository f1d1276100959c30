// A step of preference training (DPO, IPO, SimPO, ORPO: train/preference_loss.h) on any layout.
// Every micro-batch holds whole pairs: its rows 2p and 2p + 1 are a pair's chosen and rejected
// sequences, one per row, the prompt untrained (train/preference_data.h). The step runs
//   1. a forward of each micro-batch: the policy's completion log-probabilities (with the
//      training pass's LoRA dropout, whose masks the backward draws again), and, where the
//      reference is the base with the adapters off, a second forward without them;
//   2. one sum over the ranks of every sequence's figures (each rank adds what its tokens hold: a
//      context-parallel rank its share of each row, a pipeline's last stage all of its rows, every
//      other rank zeros), so that every rank computes the same loss and, for each sequence, the
//      weight d loss / d log p(sequence);
//   3. the training pass with each token's loss gradient scaled by its sequence's weight, then the
//      clip and the AdamW update like any step (train/step.h).
// Two forwards and a backward (three with the adapters-off reference) where SFT runs one and one:
// the loss of a pair is known only after its whole forward, and the head makes its logits'
// gradients chunk by chunk inside the forward, so the weights must exist before that pass.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "model/transformer.h"
#include "parallel/gradient_sync.h"
#include "train/adamw.h"
#include "train/preference_data.h"
#include "train/preference_loss.h"
#include "train/run_config.h"
#include "train/step.h"

namespace mt {

// A forward of one micro-batch through the model as placed (the model's, or a pipeline's, which
// is collective over its stages).
using ForwardPass = std::function<LossSum(const ModelInput& in)>;

// Where the reference model's log-probabilities come from.
enum class ReferenceSource {
  kNone,         // SimPO, ORPO: no reference
  kAdaptersOff,  // LoRA / QLoRA: the same weights with the adapters off, a forward per step
  kGiven,        // computed before training (full fine-tuning): passed in per row
};

struct PreferenceSetup {
  PreferenceLossConfig loss;
  ReferenceSource reference = ReferenceSource::kNone;
  // Whether this rank's forwards compute the tokens' losses: every rank but a pipeline's stages
  // before the last.
  bool holds_loss = true;
};

// train.method's loss with the run's [preference] keys (train.method other than "sft").
PreferenceLossConfig preference_loss_config(const RunConfig& cfg);

// The completion log-probabilities of a batch's rows, with or without the adapters, as the model is
// placed (the trainer's split over data-parallel ranks, or one model's forward).
using BatchLogps = std::function<std::vector<CompletionLogp>(const PackedBatch& b, bool adapters_off)>;

// The loss of every pair `next` gives (validation's held-out pairs, or every pair of a file), all
// of them as one batch so that the figure does not depend on how they are cut into batches: the
// policy's log-probabilities through `logps`, the reference as `source` says (kGiven: `stored`,
// by PreferenceData::last_sequences). NaN loss and no pairs when `next` gives none.
PreferenceResult pairs_loss(PreferenceData& data, const std::function<bool(PackedBatch&)>& next,
                            const PreferenceLossConfig& loss, ReferenceSource source,
                            std::span<const CompletionLogp> stored, const BatchLogps& logps);

// The completion log-probability of each of the `rows` rows of a step or batch over every rank
// (an input's row r is row noise.first_row + r of them): a forward of each micro-batch, with the
// adapters off when `adapters_off`, summed over the ranks by `sync` (null: one rank).
std::vector<CompletionLogp> completion_logps(const std::vector<ModelInput>& micro, int64_t rows,
                                             bool adapters_off, bool holds_loss, GradientSync* sync,
                                             const ForwardPass& forward);

// One optimizer step on `micro`, whose rows are `rows` over every rank (train.batch_size x
// train.grad_accum). `given` (ReferenceSource::kGiven): the reference log-probabilities of those
// rows, as completion_logps gives them. The result's loss is the preference loss, its
// `preference` the pairs' metrics; identical on every rank. mt::Error when the loss is not finite.
StepResult preference_step(Transformer& model, AdamW& optimizer, const std::vector<ModelInput>& micro,
                           int64_t rows, const PreferenceSetup& setup, std::span<const CompletionLogp> given,
                           const OptimConfig& cfg, int64_t step, float lr, GradientSync* sync,
                           const RunMicroBatches& run, const ForwardPass& forward);

}  // namespace mt
