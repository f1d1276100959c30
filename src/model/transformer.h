// The transformer for one device: the one block its ModelConfig describes (LLaMA, GPT-2, Qwen,
// Mistral, Gemma 3), parameters, optional LoRA adapters, forward and backward over a batch of token
// rows. It knows nothing of meshes or ranks; parallelism wraps it from outside.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "model/block.h"
#include "model/config.h"
#include "model/model_parallel.h"
#include "model/params.h"
#include "model/lora_config.h"

namespace mt {

struct ModelInput {
  const int32_t* tokens = nullptr;     // [B*T]
  const int32_t* targets = nullptr;    // [B*T], negative = not counted; may be null for logits
  const int32_t* positions = nullptr;  // [B*T] RoPE positions; null: 0..T-1 in every row
  const int32_t* segments = nullptr;   // [B*T] packed-document ids; null: one document per row
  // [B*T] 1 on a row's padding (data/packing.h), which a mixture of experts' routing losses do not
  // count, as HF's attention mask; null: no padding.
  const int32_t* padding = nullptr;
  int64_t B = 0, T = 0;
  // Preference training (train/preference_step.h) reads and weighs each sequence's tokens:
  // token_losses (out, host [B*T]): each token's loss, 0 where not counted, written by the pass
  // that holds the head (a forward or a training pass; a pipeline's last stage);
  // token_weights (in, host [B*T]): a training pass scales each token's loss gradient by its
  // weight as well as by grad_scale (one weight on all of a sequence's tokens); null: all 1;
  // adapters_off: a forward of the base alone, every LoRA adapter off and each MoE router in place
  // of its trained copy (LoRA's reference model, with no second copy of the weights). Never in a
  // training pass.
  float* token_losses = nullptr;
  const float* token_weights = nullptr;
  bool adapters_off = false;
  // The randomness of a training pass (LoRA dropout); off in evaluation and generation. Its masks
  // are a function of (seed, step, adapter, a token's row in the step's whole batch, the column),
  // never of how the batch was cut: `first_row` is the sequence of the step's batch that this
  // input's first sequence is (later micro-batches and data-parallel slices start further in), so
  // a run split over more ranks or micro-batches draws the same masks, and a resumed run the same
  // as an uninterrupted one.
  struct Noise {
    bool on = false;
    uint64_t seed = 0;  // the run's
    int64_t step = 0;
    int64_t first_row = 0;
    // Rows that are context-parallel shares (backend.h AttentionDims::cp): each of the B rows
    // holds cp part `cp_rank` of a sequence of cp T tokens, and the masks key by a token's row in
    // the whole sequences (DropoutMask::cp), as one rank holding them draws them.
    int64_t cp = 1, cp_rank = 0;
  } noise;
};

// A contiguous run of the model's units (ModelParallel's numbering: 0 = embedding, 1..L = blocks,
// L + 1 = final norm and head) and the residual stream where it is cut, for running part of the
// model (a pipeline stage runs its units). Tensors in the model's backend memory,
// Transformer::residual_rows x hidden_size elements each, f32 or the compute dtype (a pipeline's are the compute dtype: half the bytes under
// bf16), converted in and out with the backend. Where a cut can fall (between blocks) the model
// rounds the residual stream and its gradient to the compute dtype on every layout, one rank's
// included (Transformer::Runner::run), so a bf16 tensor here holds them exactly.
struct UnitSpan {
  int first = 0, last = 0;  // units [first, last]
  Tensor x_in;              // first > 0: the input of unit `first`
  Tensor x_out;             // last <= L: the output of unit `last`, written by the forward
  Tensor dy;                // last <= L, backward: the gradient of x_out
  Tensor dx;                // first > 0, backward: the gradient of x_in, written
  // With routing losses (ModelConfig::routing_losses), whose statistics span every MoE layer: the
  // packed statistics (model/moe_routing.h pack_balance_stats) the spans pass along. A forward
  // starts from those of the units before `first` (empty: none) and leaves those through `last`;
  // the span holding the head leaves the batch's totals, which a backward of a span without the
  // head reads. Required when the span is not the whole model.
  std::vector<double>* routing_stats = nullptr;
};

// The units a model is asked to run, as ModelParallel numbers them (see UnitSpan): what a pipeline
// stage tells the model it holds, so that its activations are planned for those units alone.
struct UnitRange {
  int first = 0, last = 0;  // units [first, last]
};

struct LossSum {
  double sum = 0.0;   // sum of per-token losses over counted tokens
  int64_t count = 0;  // counted tokens
  // A mixture of experts' routing losses (model/moe_routing.h) for this pass, added to the mean
  // token loss as transformers adds them (coefficients included; 0 without them). Never in `sum`:
  // the tokens' loss is what is logged and validated. A training pass computes them over the
  // tokens of every rank it was told to sum with (Transformer::set_token_sum), a forward alone
  // over its own tokens.
  double routing = 0.0;
  // A mixture of experts' choices a capacity factor dropped in this pass, over its MoE layers and
  // this rank's tokens (0 when dropless).
  int64_t dropped = 0;
};

class Transformer {
 public:
  // lora.enabled selects LoRA training: the base is frozen (no gradients, bf16-only matrices in
  // bf16 mode) and only the adapters are trainable.
  // With `own_storage` false the parameters are declared but not allocated: a parallel layer
  // (set_parallel) owns their storage and points them at it unit by unit. Every op and every
  // buffer of the model goes through `backend`.
  Transformer(const ModelConfig& config, Precision precision, const LoraConfig& lora,
             bool own_storage = true, Backend& backend = cpu_backend());
  ~Transformer();
  Transformer(const Transformer&) = delete;
  Transformer& operator=(const Transformer&) = delete;

  const ModelConfig& config() const { return config_; }
  Precision precision() const { return precision_; }
  // The dtype the GEMMs and the activations between them use: bf16 in mixed precision, else f32.
  DType compute_dtype() const { return precision_ == Precision::bf16 ? DType::bf16 : DType::f32; }
  Backend& backend() const { return backend_; }
  bool has_lora() const { return lora_.enabled; }
  const LoraConfig& lora_config() const { return lora_; }
  ParamStore& base() { return base_; }
  ParamStore& adapters() { return adapters_; }
  ParamStore& trainable() { return lora_.enabled ? adapters_ : base_; }

  // Base: N(0, 0.02) matrices and embeddings, ones for norms. Adapters: A ~ N(0, init_std), B = 0.
  // Each tensor's values depend only on (seed, name), not on layout or order.
  void init_weights(uint64_t seed);
  // The adapters alone, after the base is loaded: a trained router's copy (LoraConfig::train_router)
  // starts as the router holds it.
  void init_adapters(uint64_t seed);

  void set_activation_checkpointing(bool on) { checkpointing_ = on; }
  // The ids generation may produce: those the tokenizer can decode (0: every row of the head). A
  // vocabulary larger than the tokenizer is padding, never sampled (model/generate.h).
  void set_emittable_vocab(int64_t n) { emittable_vocab_ = n; }
  int64_t emittable_vocab() const { return emittable_vocab_ > 0 ? emittable_vocab_ : config_.vocab_size; }
  // A training run's capacity factor for a mixture of experts (ModelConfig::moe_capacity_factor;
  // 0: dropless): a routing policy, not the architecture, so it comes with the run, not the
  // checkpoint. Only for a mixture of experts.
  void set_moe_capacity_factor(float factor);
  // One GEMM for q, k and v (on by default; off only to test that both paths agree).
  // Must be chosen before the first forward.
  void set_fuse_qkv(bool on) { fuse_qkv_ = on; }
  bool fuse_qkv() const { return fuse_qkv_; }
  bool activation_checkpointing() const { return checkpointing_; }
  // A parallel layer (FSDP, tensor parallelism) called at fixed points of forward and backward;
  // null (the default) for a model whole on one device. Must be set before the first forward.
  void set_parallel(ModelParallel* parallel) { parallel_ = parallel; }
  ModelParallel* parallel() const { return parallel_; }
  // Context parallelism: each input row is this rank's share of a longer sequence, and attention
  // goes through `context` (null, the default: rows are whole). Set before the first forward.
  void set_context_attention(ContextAttention* context) { context_ = context; }
  ContextAttention* context_attention() const { return context_; }
  // Sums values over the ranks that hold the other tokens of each batch (data parallelism, FSDP,
  // context parallelism): what a mixture of experts' routing losses sum in a training pass, so
  // that every layout computes one rank's. Unset (the default): this rank holds them all. Called
  // at the same point of every training pass on every rank.
  using TokenSum = std::function<void(double* values, int64_t n)>;
  void set_token_sum(TokenSum sum) { token_sum_ = std::move(sum); }
  const TokenSum& token_sum() const { return token_sum_; }
  bool owns_storage() const { return base_.has_buffers(); }
  // The rows of the residual stream (UnitSpan's tensors) this model holds for a B x T input: all
  // B*T, or its share of them under sequence parallelism (ModelParallel::sequence_shards) where
  // they divide over its ranks (a pass whose rows do not runs them whole).
  int64_t residual_rows(int64_t B, int64_t T) const {
    const int64_t shards = parallel_ ? parallel_->sequence_shards() : 1;
    return B * T % shards == 0 ? B * T / shards : B * T;
  }
  // The only units this model will run, each range through run_units (a pipeline stage's chunks,
  // told by the pipeline): the activation arena is then planned for the largest range's blocks,
  // with the residual stream of those blocks only, and the head's buffers (final norm, a chunk of
  // logits, the loss rows) only when a range ends with the head. Empty (the default): the whole
  // model, as forward_backward runs it. Must be set before the first forward.
  void set_units(std::vector<UnitRange> ranges);
  const std::vector<UnitRange>& units() const { return units_; }

  // Forward and backward of sum(loss) * grad_scale; gradients are accumulated into the trainable
  // store's grad buffer (call zero_grad between optimizer steps). Returns the unscaled loss sum.
  LossSum forward_backward(const ModelInput& in, float grad_scale);
  // Only the units of `span`: forward (backward false) writes x_out; backward recomputes the
  // span's forward from x_in and then runs its backward from dy (or from the loss, when the span
  // ends with the head), accumulating gradients like forward_backward. The loss is counted only
  // when the span holds the head.
  LossSum run_units(const ModelInput& in, const UnitSpan& span, bool backward, float grad_scale);
  // Forward only: the loss over counted tokens.
  LossSum forward_loss(const ModelInput& in);
  // Forward only: all logits, f32 [B*T, V] into host memory (tests and generation).
  void forward_logits(const ModelInput& in, float* logits);

  // After the optimizer changed master values: refresh the bf16 copies the GEMMs read.
  void sync_compute_weights();
  // W += (alpha/r) B A for every adapter, then zero B so the adapters are inert; a trained
  // router's copy becomes the router. An NF4 base
  // cannot take the sum (it would be quantised again): merge on a bf16 or f32 base after
  // round_trip_nf4(), which gives the same dequantised base an adapter trained on NF4 saw.
  void merge_adapters();
  // Replaces each block matrix a QLoRA base quantises by its NF4 round trip (quantised and
  // dequantised by the backend), in the model's own dtype.
  void round_trip_nf4();

  // Bytes of the activation arena for the last batch shape (planned, allocated once per shape).
  size_t activation_bytes() const;

  class Runner;  // the activation arena and the forward/backward over it

 private:
  void ensure_runner();

  ModelConfig config_;
  Precision precision_;
  Backend& backend_;
  LoraConfig lora_;
  ParamStore base_;
  ParamStore adapters_;
  bool checkpointing_ = false;
  int64_t emittable_vocab_ = 0;  // set_emittable_vocab
  bool fuse_qkv_ = true;
  ModelParallel* parallel_ = nullptr;
  ContextAttention* context_ = nullptr;
  TokenSum token_sum_;
  std::vector<UnitRange> units_;  // empty: the whole model
  std::unique_ptr<Runner> runner_;
};

// HF-style names, shared by the model, loaders and exporters.
inline constexpr const char* kEmbedName = "model.embed_tokens.weight";
inline constexpr const char* kFinalNormName = "model.norm.weight";
inline constexpr const char* kFinalNormPrefix = "model.norm";  // + ".weight" / ".bias"
// Learned absolute positions (GPT-2's wpe), [max_position_embeddings, hidden]; unit 0.
inline constexpr const char* kPositionEmbedName = "model.embed_positions.weight";
inline constexpr const char* kHeadName = "lm_head.weight";
std::string layer_prefix(int64_t layer);                 // "model.layers.{i}."
// The unit (ModelParallel) a parameter or adapter belongs to: 0 the embedding (and a tied head's
// adapters), 1 + i block i, L + 1 the final norm and an untied head.
int param_unit(const std::string& name, const ModelConfig& config);
std::string proj_param_name(int64_t layer, Proj p);      // "...self_attn.q_proj" (no suffix)
std::string head_norm_name(int64_t layer, Proj p);       // "...self_attn.q_norm.weight" (p: kQ or kK)
// A mixture-of-experts layer's router weight and an expert's projection (no suffix), in the
// family's HF names: Mixtral's "...block_sparse_moe.gate.weight" and "...experts.{e}.w1" (gate),
// "w3" (up), "w2" (down); Qwen3-MoE's and OLMoE's "...mlp.gate.weight", "...mlp.experts.{e}.gate_proj".
std::string moe_router_name(int64_t layer, const ModelConfig& config);
std::string expert_param_name(int64_t layer, int64_t expert, ExpertProj p, const ModelConfig& config);
// Whether a parameter is an MoE router's weight (kept as it is by QLoRA, like the head).
bool moe_router_param(const std::string& name);
// A router's trainable copy among the adapters (LoraConfig::train_router): "...gate.modules_to_save.weight",
// PEFT's name for its copy less the adapter's name. Saved in a PEFT adapter under the router's own
// name (io/peft_names.h file_tensor_name), as PEFT saves it.
std::string moe_router_copy_name(int64_t layer, const ModelConfig& config);
bool moe_router_copy_param(const std::string& name);
// The router a copy was made from.
std::string router_of_copy(const std::string& copy_name);
// The embedding's and an untied head's trainable copies among the adapters
// (LoraConfig::train_embeddings): "model.embed_tokens.modules_to_save.weight",
// "lm_head.modules_to_save.weight", saved in a PEFT adapter under the module's own name as PEFT
// saves a modules_to_save copy.
inline constexpr const char* kEmbedCopyName = "model.embed_tokens.modules_to_save.weight";
inline constexpr const char* kHeadCopyName = "lm_head.modules_to_save.weight";
bool embedding_copy_param(const std::string& name);
// The base parameter a copy (a router's or the embedding's) was made from: "X.modules_to_save.weight" -> "X.weight".
std::string module_of_copy(const std::string& copy_name);
// The norm before the MLP, after layer_prefix: LLaMA's "post_attention_layernorm.weight" or, in a
// model with post norms (Gemma), "pre_feedforward_layernorm.weight" (Gemma's
// post_attention_layernorm is the norm of the attention's output).
const char* mlp_norm_name(const ModelConfig& config);
// Whether a parameter's gradient comes from the residual stream's rows: the norms on it (a
// block's, Gemma's post norms, the final norm; weights and LayerNorm biases). Under sequence
// parallelism each rank computes its share of the rows' sum (ModelParallel::sequence_shards).
bool sequence_split_gradient(const std::string& name);
// Which projections lora.targets gives adapters: roles (q, k, v, o, gate, up, down) or GPT-2's
// modules: c_attn (q, k and v), c_proj (o and down), c_fc (up).
std::array<bool, kNumProj> lora_targets_mask(const LoraConfig& lora);
// GPT-2's c_attn adapter (lora.targets "c_attn"): one adapter on the fused q, k, v matrix, as PEFT
// puts it there: q, k and v share its A ("...self_attn.c_attn.lora_A.weight"), each has its rows
// of B (its own "..._proj.lora_B.weight", so tensor parallelism splits q, k and v each).
bool lora_fuses_qkv(const LoraConfig& lora);
// The A that projection p's adapter reads.
std::string lora_a_name(int64_t layer, Proj p, const LoraConfig& lora);
bool lora_targets_head(const LoraConfig& lora);

}  // namespace mt
