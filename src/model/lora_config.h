// How a model is built for training: the arithmetic precision of its compute copies and the LoRA
// adapters attached to it. Part of the run config, declared here so the model needs nothing from
// the trainer.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace mt {

enum class Precision { fp32, bf16 };
inline const char* precision_name(Precision p) { return p == Precision::fp32 ? "fp32" : "bf16"; }

struct LoraConfig {
  bool enabled = false;
  int64_t rank = 8;
  float alpha = 16.0f;
  // Subset of: q, k, v, o, gate, up, down, lm_head
  std::vector<std::string> targets = {"q", "k", "v", "o", "gate", "up", "down"};
  float init_std = 0.02f;  // A ~ N(0, init_std); B = 0
  // Dropout on the adapter's input x in training (PEFT's lora_dropout): u = dropout(x) A^T.
  float dropout = 0.0f;
  // rsLoRA (PEFT's use_rslora): scale by alpha / sqrt(rank), which keeps the update's size steady
  // as the rank grows; plain LoRA scales by alpha / rank.
  bool rank_stabilized = false;
  // The frozen base's block matrices: "bf16" (as the precision gives) or "nf4" (QLoRA: 4-bit
  // NormalFloat with double quantisation, core/nf4.h; dequantised for each GEMM).
  std::string base_dtype = "bf16";
  // A mixture of experts' routers trained too (PEFT's modules_to_save = ["gate"]): each MoE
  // layer's router gets a trainable copy among the adapters, started from the frozen router and
  // used in its place; the base router stays as loaded. false: routers frozen, as the experts.
  bool train_router = false;
  // The embedding (and an untied head) trained in full beside the adapters (PEFT's
  // modules_to_save = ["embed_tokens", "lm_head"]): set when data.add_tokens grows the vocabulary,
  // whose new rows must learn. A trainable copy of each, started from the base and used in its
  // place (a tied head reads the embedding's copy); the base stays as loaded.
  bool train_embeddings = false;

  // Training refuses nf4 without adapters (a 4-bit base is frozen); evaluation may use it alone.
  bool quantized_base() const { return base_dtype == "nf4"; }

  // The factor on B A in W + scale * B A.
  float scale() const { return rank_stabilized ? alpha / std::sqrt(float(rank)) : alpha / float(rank); }
};

}  // namespace mt
