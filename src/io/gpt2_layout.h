// GPT-2's Hugging Face layout (GPT2LMHeadModel) against meshtrain's tensors: the one table that
// maps each of the model's parameters (model/param_shapes.h: LLaMA's names, with GPT-2's parts)
// to the HF tensor that holds it, for loading, checking and writing an HF directory.
//   model.embed_tokens.weight                   wte.weight
//   model.embed_positions.weight                wpe.weight
//   model.layers.N.input_layernorm.{weight,bias}           h.N.ln_1.{weight,bias}
//   model.layers.N.self_attn.{q,k,v}_proj.{weight,bias}    h.N.attn.c_attn.{weight,bias} (fused)
//   model.layers.N.self_attn.o_proj.{weight,bias}          h.N.attn.c_proj.{weight,bias}
//   model.layers.N.post_attention_layernorm.{weight,bias}  h.N.ln_2.{weight,bias}
//   model.layers.N.mlp.up_proj.{weight,bias}               h.N.mlp.c_fc.{weight,bias}
//   model.layers.N.mlp.down_proj.{weight,bias}             h.N.mlp.c_proj.{weight,bias}
//   model.norm.{weight,bias}                    ln_f.{weight,bias}
// HF's GPT-2 stores its projections as Conv1D, weight [in, out] (transposed against nn.Linear's
// [out, in], which meshtrain keeps), and q, k and v as one c_attn of 3 * hidden outputs in that
// order. Files name the tensors with or without the "transformer." prefix (GPT2LMHeadModel
// writes it, GPT2Model does not); the head is tied (lm_head.weight, when present, is wte) and the
// attention-mask buffers attn.bias / attn.masked_bias some files carry are not parameters.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "io/weight_shapes.h"
#include "model/config.h"

namespace mt {

// Where one of meshtrain's tensors is in a GPT-2 checkpoint.
struct Gpt2Part {
  std::string hf_name;             // without the prefix
  std::vector<int64_t> hf_shape;   // the whole HF tensor's shape
  bool conv1d = false;             // a Conv1D weight: [in, out], the transpose of ours
  int64_t first = 0, count = 0;    // of c_attn's outputs: this part's [first, first + count); 0 count: all
};

// The HF part of parameter `name` (of `shape`, as model/param_shapes.h gives it) of a GPT-2
// config. Throws mt::Error for a name GPT-2 does not have.
Gpt2Part gpt2_part(const std::string& name, const std::vector<int64_t>& shape, const ModelConfig& c);

// "transformer." when the file names its tensors so (it holds transformer.wte.weight), else "".
std::string gpt2_prefix(const std::vector<std::string>& hf_names);

// mt::Error, one line starting with `where`, unless the file (its tensor names and shapes, HF's)
// holds every HF tensor of the config's GPT-2 with its shape: the layer count first (the highest
// "h.N." against n_layer), then each tensor, named as the file names it.
void check_gpt2_held_shapes(const ModelConfig& c, const HeldTensors& held, const std::string& where);

// Reads our tensor from the HF one: `read_hf` fills the whole HF tensor (hf_shape's elements, f32).
std::vector<float> read_gpt2_tensor(const Gpt2Part& part,
                                    const std::function<std::vector<float>(const std::string&)>& read_hf);

// The HF tensors of a GPT-2 model in GPT2LMHeadModel's order and names (prefix "transformer."),
// and each one's values assembled from ours: `ours` gives one of our tensors by name (f32).
struct Gpt2HfTensor {
  std::string name;
  std::vector<int64_t> shape;
};
std::vector<Gpt2HfTensor> gpt2_hf_tensors(const ModelConfig& c);
std::vector<float> gpt2_hf_values(const std::string& hf_name, const ModelConfig& c,
                                  const std::function<std::vector<float>(const std::string&)>& ours);

// GPT-2's PEFT adapter (lora.targets c_attn, c_proj, c_fc, lm_head): PEFT's tensors under its
// module names, each the rows of ours stacked in order: c_attn's lora_A is our shared
// "...self_attn.c_attn.lora_A.weight", its lora_B our q, k and v lora_B one under the other
// ([q_dim + 2 kv_dim, r]); attn.c_proj is o_proj, mlp.c_fc up_proj, mlp.c_proj down_proj. PEFT's
// LoRA matrices are nn.Linear's [r, in] and [out, r] on a Conv1D too (fan_in_fan_out concerns the
// base weight only): nothing is transposed. Names are without PEFT's "base_model.model." prefix.
struct Gpt2AdapterTensor {
  std::string name;            // e.g. "transformer.h.0.attn.c_attn.lora_B.weight"
  std::vector<int64_t> shape;
  std::vector<std::string> parts;  // our tensors, stacked by rows in this order
};
// From our adapters' names and shapes (in their order); mt::Error for a name GPT-2 has no module for.
std::vector<Gpt2AdapterTensor> gpt2_peft_tensors(const std::vector<std::pair<std::string, std::vector<int64_t>>>& ours);
// Whether lora.targets names GPT-2's modules (its adapter is then written and read as GPT-2's).
bool gpt2_lora_targets(const std::vector<std::string>& targets);

}  // namespace mt
