// A vocabulary that tensor parallelism does not divide (GPT-2's 50257 on tp = 2) is padded with
// zero rows at its end, as a property of the layout only:
//
//   - The embedding, the head and the head's lora_B are laid out, stored, gathered, reduced and
//     updated as [padded vocabulary, ...] tensors, so every tp rank's share (and every fsdp block of
//     it) has the same size, as the layout, the FSDP gathers and the optimizer need.
//   - The model on each tp rank computes with its TRUE rows only (tensor_parallel_config): the rank
//     holding the padding runs a shorter head, so padded logits never exist. The loss is the
//     unpadded model's, nothing samples a padded token, and the padded rows' gradients stay zero
//     (the units' gradients are zeroed whole), so AdamW leaves them zero.
//   - Checkpoints, exports and `meshtrain shard`'s totals say the true vocabulary: the padding is
//     stripped on the way out and added (zero) on the way in, so a checkpoint resumes across tp.
//
// The vocabulary is padded to the next multiple of tp, not to a fixed 128 or Megatron's 128 x tp:
// those pad for the alignment of GEMMs that compute the padded rows, and here none does, so the
// least padding is the least memory (docs/mesh.md, "Padded vocabulary").
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/param_shapes.h"
#include "model/transformer.h"

namespace mt::parallel {

// `vocab` rounded up to a multiple of `tp` (itself when tp divides it).
inline int64_t padded_vocab_size(int64_t vocab, int64_t tp) {
  MT_CHECK(vocab > 0 && tp > 0, "padded_vocab_size of a positive vocabulary and tp");
  return (vocab + tp - 1) / tp * tp;
}

// Whether `name` is a tensor whose rows are the vocabulary (embedding, head, the head's lora_B, and
// the embedding's and head's trained copies of lora.train_embeddings).
inline bool has_vocab_rows(const std::string& name) {
  return name == kEmbedName || name == kHeadName || name == "lm_head.lora_B.weight" || name == kEmbedCopyName ||
         name == kHeadCopyName;
}

// The shapes the layout places: `params` with the vocabulary rows padded for `tp`. The same shapes
// when tp divides the vocabulary.
inline std::vector<ParamShape> laid_out_shapes(const std::vector<ParamShape>& params, int64_t tp) {
  std::vector<ParamShape> out = params;
  for (ParamShape& p : out)
    if (has_vocab_rows(p.name)) p.shape.at(0) = padded_vocab_size(p.shape.at(0), tp);
  return out;
}

// The rows of tp rank `tp_rank`'s share of the padded vocabulary that are true tokens. Throws one
// line when a rank would hold padding only (a vocabulary smaller than tp x (tp - 1)).
inline int64_t true_vocab_rows(int64_t vocab, int64_t tp, int64_t tp_rank) {
  const int64_t share = padded_vocab_size(vocab, tp) / tp;
  const int64_t last = vocab - (tp - 1) * share;  // the last rank's, the only one with padding
  if (last <= 0)
    fail("tensor parallelism: model.vocab_size (" + std::to_string(vocab) + ") padded to " +
         std::to_string(share * tp) + " rows for tp=" + std::to_string(tp) +
         " leaves the last tp rank no token of its own; use a smaller tp");
  return tp_rank == tp - 1 ? last : share;
}

// "vocabulary 50257 padded to 50258 rows for tp=2 (1 zero row, never trained, not saved)", or ""
// when tp divides the vocabulary: the line a run prints when it pads.
inline std::string vocab_padding_note(int64_t vocab, int64_t tp) {
  const int64_t padded = padded_vocab_size(vocab, tp);
  if (padded == vocab) return "";
  const int64_t pad = padded - vocab;
  return "vocabulary " + std::to_string(vocab) + " padded to " + std::to_string(padded) + " rows for tp=" +
         std::to_string(tp) + " (" + std::to_string(pad) + " zero row" + (pad == 1 ? "" : "s") +
         ", never trained, not saved)";
}

}  // namespace mt::parallel
