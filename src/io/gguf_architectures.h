// llama.cpp's model architectures as meshtrain writes and reads them in GGUF: one table entry per
// architecture, holding its name, the metadata it carries, its tensor names and how its RoPE
// pairs q and k. The exporter (io/gguf_export.h) and the reader (io/gguf_model.h) know nothing
// of a family beyond its entry, so another family is another entry (docs/formats.md, "GGUF
// per family").
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/gguf_reader.h"
#include "io/gguf_types.h"
#include "model/config.h"

namespace mt {

// A hyper-parameter stored as "<architecture>.<key>" (the keys of llama.cpp's gguf-py constants).
enum class GgufHparam {
  context_length,        // context_length: max_position_embeddings
  embedding_length,      // embedding_length: hidden_size
  block_count,           // block_count: num_hidden_layers
  feed_forward_length,   // feed_forward_length: intermediate_size
  rope_dimension_count,  // rope.dimension_count: head_dim (the whole head rotates)
  head_count,            // attention.head_count
  head_count_kv,         // attention.head_count_kv
  rms_norm_eps,          // attention.layer_norm_rms_epsilon
  layer_norm_eps,        // attention.layer_norm_epsilon (GPT-2's LayerNorm; rms_norm_eps holds it)
  rope_freq_base,        // rope.freq_base: rope_theta
  rope_freq_base_swa,    // rope.freq_base_swa: the windowed layers' base (rope_local_theta)
  rope_scaling_linear,   // rope.scaling.type "linear" and rope.scaling.factor, when scaled
  sliding_window,        // attention.sliding_window and attention.sliding_window_pattern (one bool
                         // a layer), when some layer has a window
  vocab_size,            // vocab_size
  head_length,           // attention.key_length and value_length: head_dim, written only where it
                         // is not hidden_size / num_attention_heads (llama.cpp's default)
  expert_count,          // expert_count and expert_used_count: num_experts, num_experts_per_tok
                         // (written for a mixture of experts only)
  expert_width,          // expert_feed_forward_length: moe_intermediate_size (qwen3moe; llama and
                         // olmoe size their experts by feed_forward_length)
};

// One tensor's names: the HF name (after "model.layers.N." for a layer's tensor) and llama.cpp's
// (after "blk.N."). Several HF names with one llama.cpp name are one tensor there, theirs
// stacked by rows in the table's order (GPT-2's attn_qkv: q, k, v). An HF name with "*" in place
// of an expert's index ("mlp.experts.*.up_proj.weight") names every expert's projection, stacked
// in expert order along a new outermost dimension ([experts, out, in]: llama.cpp's ffn_up_exps,
// ne = {in, out, experts}).
struct GgufTensorName {
  const char* hf;
  const char* gguf;
};

// How an architecture holds a mixture of experts (model/moe.h), as llama.cpp's graph for it computes
// one: its router and experts on every layer (ffn_gate_inp, and each projection's experts stacked
// in one 3-D ffn_*_exps tensor), softmax over the experts, the top k, their weights renormalised
// or not (llama.cpp fixes that per architecture: no key sets it).
enum class GgufMoe {
  none,        // dense only
  optional,    // llama: dense, or sparse on every layer when expert_count > 0 (Mixtral)
  required,    // qwen3moe, olmoe: sparse on every layer
};

// How llama.cpp's graph for the architecture scales the attention scores.
enum class GgufAttentionScale {
  head_dim,  // 1 / sqrt(head_dim)
  gemma3,    // llama.cpp's gemma3: 1 / sqrt(head_dim), but 1 / sqrt(hidden / heads) for 62 layers (27B)
};

struct GgufArchitecture {
  const char* name = "";        // general.architecture, and the prefix of its hyper-parameter keys
  const char* model_type = "";  // the HF model_type a file of this architecture reads back as
  std::vector<std::string> written_for;  // the model_types exported as this architecture
  // llama.cpp's "llama" RoPE rotates adjacent pairs (LLAMA_ROPE_TYPE_NORM), so q and k rows are
  // permuted from HF's rotate-half order; the others rotate halves (NEOX) and take HF's rows.
  bool interleaved_rope = false;
  // Reads llama3 RoPE scaling from a rope_freqs.weight tensor (llama.cpp's llama does; a tensor
  // an architecture does not load fails llama.cpp's tensor count, so the others refuse it).
  bool rope_freqs = false;
  // llama.cpp sizes q [hidden, hidden] and o [hidden, hidden] (qwen2, gpt2): heads x head_dim
  // must be the hidden size.
  bool q_width_is_hidden = false;
  // llama.cpp computes the layers' attention windows (gemma3's interleaved sliding window).
  bool sliding_window = false;
  GgufAttentionScale attention_scale = GgufAttentionScale::head_dim;
  GgufMoe moe = GgufMoe::none;
  bool moe_renormalize = false;  // the chosen experts' weights divided by their sum (llama, qwen3moe)
  // The model type a file with experts reads back as ("" : model_type's own).
  const char* moe_model_type = "";
  // llama.cpp sizes k_norm [hidden] (olmoe's q/k norms over the whole projections): heads x
  // head_dim and kv heads x head_dim must both be the hidden size.
  bool kv_width_is_hidden = false;
  // llama.cpp loads output.weight unconditionally (olmoe): tied embeddings cannot be written.
  bool output_required = false;
  std::vector<GgufHparam> hparams;
  std::vector<GgufTensorName> model_tensors;  // whole names, outside the layers
  std::vector<GgufTensorName> layer_tensors;  // a tensor without a name here cannot be written
  // The family's block parts (model/config.h) for a file read back; nullptr: LLaMA's.
  void (*block)(ModelConfig&) = nullptr;
};

// The architectures meshtrain writes: llama (llama, mistral, mixtral), qwen2, qwen3, gpt2, gemma3,
// qwen3moe, olmoe.
const std::vector<GgufArchitecture>& gguf_architectures();
// The entry named `name` (general.architecture), nullptr for one meshtrain does not read.
const GgufArchitecture* find_gguf_architecture(const std::string& name);
// The entry a model of this config is written as. mt::Error naming `where` when its model_type
// has none, or when it has a part the architecture cannot hold or would compute otherwise (a
// tensor without a GGUF name, a q width other than the hidden size where llama.cpp fixes it,
// llama3 rope scaling elsewhere than llama, linear scaling elsewhere than gemma3, an attention
// scale other than llama.cpp's, windows of more than one width; for a mixture of experts: a dense
// layer, a capacity limit, renormalisation other than the architecture's, q/k norms of another
// width than llama.cpp's, tied embeddings where llama.cpp requires output.weight). Windows on an architecture
// without them are not refused here: see gguf_window_note.
const GgufArchitecture& gguf_architecture_for(const ModelConfig& c, const std::string& where);

// llama.cpp's name of an HF-named tensor ("model.layers.0.self_attn.q_proj.weight" ->
// "blk.0.attn_q.weight"); nullopt for one the architecture has no name for.
std::optional<std::string> gguf_name_of(const GgufArchitecture& a, const std::string& hf_name);
// The same, throwing mt::Error naming the tensor and the architecture.
std::string gguf_tensor_name(const GgufArchitecture& a, const std::string& hf_name);
// The inverse: the HF names a llama.cpp tensor holds (several for a stacked one, in its order;
// `experts` of them for a stack of experts), empty for a name the entry does not list.
std::vector<std::string> hf_names_of_gguf_tensor(const GgufArchitecture& a, const std::string& gguf_name,
                                                 int64_t experts = 0);
// Whether the llama.cpp tensor stacks experts (its parts along a new outermost dimension).
bool gguf_stacks_experts(const GgufArchitecture& a, const std::string& gguf_name);
// Heads whose rows the q / k permutation reorders in an HF-named projection: 0 for other tensors
// and for architectures that take HF's rows.
int64_t gguf_rotary_heads(const GgufArchitecture& a, const std::string& hf_name, const ModelConfig& c);
// What is added to an HF-named tensor's values in the file: the norm weight offset for a norm's
// weight (llama.cpp's RMSNorm scales by the stored weight alone, so Gemma's (1 + w) is stored as
// 1 + w, as llama.cpp's converter does), else 0. The reader subtracts it.
float gguf_value_shift(const std::string& hf_name, const ModelConfig& c);

// The GGUF tensors of a model whose tensors are `hf_names` (in the model's order): each llama.cpp
// name once, in the order of its first part, with its parts (HF names) in the table's order.
// A stack of experts has one part per expert, in expert order (gguf_stacks_experts).
struct GgufSlot {
  std::string gguf;
  std::vector<std::string> parts;
  bool experts = false;
};
std::vector<GgufSlot> gguf_slots(const GgufArchitecture& a, const std::vector<std::string>& hf_names);

// The architecture's "<name>.*" hyper-parameter key/values for a model of config c. mt::Error
// naming the field for a size beyond GGUF's 32 bits.
std::vector<GgufKV> gguf_hparam_kvs(const GgufArchitecture& a, const ModelConfig& c);
// The sizes of c from a file's "<name>.*" keys: the required ones (mt::Error naming the file and
// key when absent or of another type), the optional ones at llama.cpp's defaults (kv heads = heads,
// rope base 10000, vocabulary = the embedding's rows, head_dim = hidden / heads, windowed-layer
// base 10000, window pattern 5 local : 1 global); a rotary dimension other than the head dim is
// refused (meshtrain rotates whole heads); the attention scale is llama.cpp's for the architecture.
void read_gguf_hparams(const GgufArchitecture& a, const GgufFile& g, ModelConfig& c);

// "" when llama.cpp computes the model's attention as meshtrain does; else one line saying that
// the windowed layers attend to the whole context in llama.cpp (an architecture without a
// sliding window), and up to which context length the two agree.
std::string gguf_window_note(const GgufArchitecture& a, const ModelConfig& c);

}  // namespace mt
