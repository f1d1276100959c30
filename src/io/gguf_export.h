// Export to GGUF, llama.cpp's file format: the full model (in the llama.cpp architecture of its
// family, io/gguf_architectures.h: llama for LLaMA, Mistral and Mixtral, qwen2, qwen3, gpt2,
// gemma3, qwen3moe, olmoe) or a
// LoRA adapter (as llama.cpp's convert_lora_to_gguf.py writes it).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/tokenizer_info.h"
#include "io/gguf_architectures.h"
#include "model/transformer.h"

namespace mt {

// Element type of the matrices (norms and other 1-D tensors are always F32, and so is GPT-2's
// position_embd.weight, as llama.cpp's converter and llama-quantize keep it). The quantised types
// follow llama.cpp's llama-quantize: every matrix in that type, except that a Q4_0 file keeps the
// output matrix (output.weight, or token_embd.weight when the embeddings are tied) at Q8_0, since
// llama-quantize raises it to Q6_K, a type meshtrain does not write. A matrix whose rows are not
// a multiple of 32 values cannot be block-quantised and stays F16, as llama.cpp's converter does.
enum class GgufDtype { f32, f16, bf16, q8_0, q4_0 };

// Parses "f32", "f16", "bf16", "q8_0" or "q4_0"; throws mt::Error naming the choices otherwise.
GgufDtype parse_gguf_dtype(const std::string& name);

// Writes the base weights (adapters are not merged; call merge_adapters first to include them).
// For the llama architecture q and k rows are permuted from the model's rotate-half layout to the
// interleaved layout llama.cpp's LLaMA graph expects; tensors llama.cpp stacks (GPT-2's attn_qkv,
// a mixture of experts' ffn_*_exps) are written stacked, the router (ffn_gate_inp) F32 in every type, and norm weights with the model's norm weight offset added (Gemma's
// 1 + w: gguf_value_shift). general.name is the file name without its
// extension. mt::Error naming `path`, before anything is written, for a model the family's
// architecture cannot hold (gguf_architecture_for).
// tok (optional) adds the tokenizer.ggml.* keys; its token count must equal vocab_size.
// With llama3 rope scaling a rope_freqs.weight tensor carries the per-frequency factors (linear
// scaling is a key of the architecture: gemma3).
// general.file_type labels the file by what it holds: the type asked for when some matrix takes
// it, else the type most matrices fell back to (a q4_0 request on rows that are not whole blocks
// writes, and says, F16).
struct GgufModelWritten {
  std::vector<std::string> kept_f16;  // GGUF names of the matrices kept at F16 instead of `dtype`
  GgufDtype file_type = GgufDtype::f32;
  std::string architecture;  // general.architecture
  std::string note;          // "" or one line on what llama.cpp computes otherwise (gguf_window_note)
};
GgufModelWritten export_gguf_model(Transformer& model, const std::string& path, const TokenizerInfo* tok,
                                   GgufDtype dtype);
// The name parse_gguf_dtype reads ("q4_0").
const char* gguf_dtype_name(GgufDtype d);

// Writes the model's adapters (F32) as a GGUF LoRA adapter of the model's architecture:
// <base tensor>.lora_a / .lora_b, the lora_b rows of q and k permuted like the base rows, alpha in
// adapter.lora.alpha; the experts' adapters stacked as their base tensor (lora_a [experts, rank,
// in], lora_b [experts, out, rank]). base_name goes to general.name. Throws mt::Error when the model has no
// adapters, when alpha <= 0, when lm_head is adapted in a tied-embedding model (llama.cpp has no
// output.weight to attach it to), when an adapted projection is stacked with others in llama.cpp
// (GPT-2's c_attn), or when the architecture cannot hold the model.
void export_gguf_lora(Transformer& model, const std::string& path, const std::string& base_name);

// The inverse of permute_rotary_rows (llama2c.h): HF row (head, half, i) goes to interleaved row
// (head, i, half). rows = heads * head_dim, each row cols wide.
void unpermute_rotary_rows(const float* src, float* dst, int64_t heads, int64_t head_dim, int64_t cols);

}  // namespace mt
