#include "io/gguf_export.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>

#include "core/bf16.h"
#include "core/error.h"
#include "core/f16.h"
#include "io/ggml_quants.h"
#include "io/gguf_architectures.h"
#include "io/gguf_tokenizer.h"
#include "io/gguf_writer.h"
#include "core/rope_frequencies.h"

namespace mt {

void unpermute_rotary_rows(const float* src, float* dst, int64_t heads, int64_t head_dim,
                           int64_t cols) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t s = 0; s < 2; ++s)
      for (int64_t i = 0; i < half; ++i)
        std::memcpy(dst + (h * head_dim + 2 * i + s) * cols, src + (h * head_dim + s * half + i) * cols,
                    size_t(cols) * sizeof(float));
}

namespace {

// The f32 values of a parameter, copied off its store's device: its master copy, or the bf16
// compute copy widened (a frozen base in bf16 mode has only that).
std::vector<float> values_of(const ParamStore& store, const Param& p) {
  MT_CHECK(p.master || p.compute, "parameter without values: " + p.name);
  std::vector<float> v(size_t(p.numel));
  store.get_values(p, v.data());
  return v;
}

std::vector<float> interleaved(std::vector<float> v, int64_t heads, const ModelConfig& c) {
  if (heads == 0) return v;
  std::vector<float> out(v.size());
  const int64_t rows = heads * c.head_dim();
  unpermute_rotary_rows(v.data(), out.data(), heads, c.head_dim(), int64_t(v.size()) / rows);
  return out;
}

GgmlType ggml_type_of(GgufDtype d) {
  switch (d) {
    case GgufDtype::f16: return GgmlType::f16;
    case GgufDtype::bf16: return GgmlType::bf16;
    case GgufDtype::q8_0: return GgmlType::q8_0;
    case GgufDtype::q4_0: return GgmlType::q4_0;
    default: return GgmlType::f32;
  }
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The shape of a slot's tensor: its parts stacked by rows, or a stack of experts [experts, out, in]
// (quantised blocks then run along each expert's rows, its innermost dimension).
std::vector<int64_t> slot_shape(const ParamStore& store, const GgufSlot& slot) {
  std::vector<int64_t> shape = store.get(slot.parts.front()).shape;
  if (slot.experts) {
    shape.insert(shape.begin(), int64_t(slot.parts.size()));
    return shape;
  }
  for (size_t k = 1; k < slot.parts.size(); ++k) shape[0] += store.get(slot.parts[k]).shape[0];
  return shape;
}

// The type one tensor of `shape` is written in (see GgufDtype).
GgmlType tensor_type(const std::vector<int64_t>& shape, const std::string& gguf_name, GgufDtype dtype, bool tied) {
  if (shape.size() == 1) return GgmlType::f32;  // norms stay F32, as llama.cpp keeps them
  // So do GPT-2's position table and a mixture of experts' router: llama.cpp's converter writes
  // them F32 and llama-quantize keeps them so.
  if (gguf_name == "position_embd.weight" || ends_with(gguf_name, ".ffn_gate_inp.weight")) return GgmlType::f32;
  GgmlType t = ggml_type_of(dtype);
  const bool output = gguf_name == "output.weight" || (tied && gguf_name == "token_embd.weight");
  if (t == GgmlType::q4_0 && output) t = GgmlType::q8_0;
  if (shape.back() % ggml_block_size(t) != 0) t = GgmlType::f16;
  return t;
}

void encode(const std::vector<float>& v, GgmlType t, std::vector<char>& out) {
  out.resize(ggml_tensor_bytes(t, v.size(), "GGUF export"));
  if (t == GgmlType::q8_0) return quantize_q8_0(v.data(), int64_t(v.size()), out.data());
  if (t == GgmlType::q4_0) return quantize_q4_0(v.data(), int64_t(v.size()), out.data());
  if (t == GgmlType::f32) {
    std::memcpy(out.data(), v.data(), out.size());
    return;
  }
  for (size_t k = 0; k < v.size(); ++k) {
    const uint16_t h = t == GgmlType::f16 ? float_to_f16(v[k]) : float_to_bf16(v[k]).bits;
    std::memcpy(out.data() + 2 * k, &h, 2);
  }
}

// A tensor whose bytes are produced while the file is written, so converted copies exist one at
// a time.
GgufTensorOut lazy_tensor(const ParamStore& store, const Param& p, std::string name, GgmlType type,
                          int64_t heads, const ModelConfig& c) {
  GgufTensorOut t;
  t.name = std::move(name);
  t.shape = p.shape;
  t.type = type;
  t.fill = [&store, &p, type, heads, &c](std::vector<char>& out) {
    encode(interleaved(values_of(store, p), heads, c), type, out);
  };
  return t;
}

// One tensor of the model file: its parts' values (q / k rows interleaved where the architecture
// rotates pairs, norm weights shifted: gguf_value_shift) stacked by rows.
GgufTensorOut model_tensor(const ParamStore& store, const GgufArchitecture& arch, const GgufSlot& slot,
                           GgmlType type, const ModelConfig& c) {
  GgufTensorOut t;
  t.name = slot.gguf;
  t.type = type;
  t.shape = slot_shape(store, slot);
  t.fill = [&store, &arch, &slot, type, &c](std::vector<char>& out) {
    std::vector<float> v;
    for (const std::string& part : slot.parts) {
      const Param& p = store.get(part);
      std::vector<float> one = interleaved(values_of(store, p), gguf_rotary_heads(arch, part, c), c);
      const float shift = gguf_value_shift(part, c);
      for (float& x : one) x += shift;
      v.insert(v.end(), one.begin(), one.end());
    }
    encode(v, type, out);
  };
  return t;
}

// One side ("A" or "B") of the adapters of a stack of experts: each expert's lora_<side> matrix,
// in expert order, along a new outermost dimension (F32).
GgufTensorOut stacked_adapter(const ParamStore& adapters, const GgufSlot& slot, const std::string& side) {
  auto adapter_of = [&adapters, side](const std::string& base) -> const Param& {
    return adapters.get(base.substr(0, base.size() - std::string(".weight").size()) + ".lora_" + side + ".weight");
  };
  GgufTensorOut t;
  t.name = slot.gguf + (side == "A" ? ".lora_a" : ".lora_b");
  t.type = GgmlType::f32;
  t.shape = adapter_of(slot.parts.front()).shape;
  t.shape.insert(t.shape.begin(), int64_t(slot.parts.size()));
  t.fill = [&adapters, &slot, adapter_of](std::vector<char>& out) {
    std::vector<float> v;
    for (const std::string& base : slot.parts) {
      const std::vector<float> one = values_of(adapters, adapter_of(base));
      v.insert(v.end(), one.begin(), one.end());
    }
    encode(v, GgmlType::f32, out);
  };
  return t;
}

// The model's parameters as the file's tensors (gguf_slots).
std::vector<GgufSlot> slots_of(const ParamStore& store, const GgufArchitecture& arch) {
  std::vector<std::string> names;
  for (const Param& p : store.params()) names.push_back(p.name);
  return gguf_slots(arch, names);
}

// llama.cpp applies llama3 rope scaling through per-frequency divisors of the angle
// (rope_freqs.weight): factor[i] = inv_freq_unscaled[i] / inv_freq_scaled[i].
std::vector<float> rope_freq_factors(const ModelConfig& c) {
  const int64_t D = c.head_dim();
  std::vector<float> plain(size_t(D / 2)), scaled(size_t(D / 2));
  rope_inv_freq(plain.data(), D, c.rope_theta, RopeScaling{});
  rope_inv_freq(scaled.data(), D, c.rope_theta, c.rope_scaling);
  std::vector<float> f(plain.size());
  for (size_t i = 0; i < f.size(); ++i) f[i] = plain[i] / scaled[i];
  return f;
}

// llama_ftype: ALL_F32 = 0, MOSTLY_F16 = 1, MOSTLY_Q4_0 = 2, MOSTLY_Q8_0 = 7, MOSTLY_BF16 = 32.
uint32_t file_type(GgufDtype d) {
  switch (d) {
    case GgufDtype::f32: return 0;
    case GgufDtype::f16: return 1;
    case GgufDtype::q4_0: return 2;
    case GgufDtype::q8_0: return 7;
    case GgufDtype::bf16: return 32;
  }
  return 0;
}

GgufDtype dtype_of(GgmlType t) {
  switch (t) {
    case GgmlType::f16: return GgufDtype::f16;
    case GgmlType::bf16: return GgufDtype::bf16;
    case GgmlType::q8_0: return GgufDtype::q8_0;
    case GgmlType::q4_0: return GgufDtype::q4_0;
    case GgmlType::f32: break;
  }
  return GgufDtype::f32;
}

// What the file is labelled (general.file_type): the type asked for when some matrix holds it,
// as llama-quantize labels a Q4_0 file whose output matrix it raised; otherwise (every matrix fell
// back) the type most matrices hold, so that a "q4_0" file of F16 matrices says F16.
GgufDtype held_dtype(const std::vector<GgmlType>& matrix_types, GgufDtype asked) {
  std::map<GgmlType, int> count;
  for (GgmlType t : matrix_types) ++count[t];
  if (matrix_types.empty() || count[ggml_type_of(asked)] > 0) return asked;
  GgmlType most = GgmlType::f16;
  for (const auto& [t, n] : count)
    if (n > count[most]) most = t;
  return dtype_of(most);
}

}  // namespace

GgufDtype parse_gguf_dtype(const std::string& name) {
  if (name == "f32") return GgufDtype::f32;
  if (name == "f16") return GgufDtype::f16;
  if (name == "bf16") return GgufDtype::bf16;
  if (name == "q8_0") return GgufDtype::q8_0;
  if (name == "q4_0") return GgufDtype::q4_0;
  fail("GGUF type '" + name + "' is not one of f32, f16, bf16, q8_0, q4_0");
}

const char* gguf_dtype_name(GgufDtype d) {
  switch (d) {
    case GgufDtype::f16: return "f16";
    case GgufDtype::bf16: return "bf16";
    case GgufDtype::q8_0: return "q8_0";
    case GgufDtype::q4_0: return "q4_0";
    case GgufDtype::f32: break;
  }
  return "f32";
}

GgufModelWritten export_gguf_model(Transformer& model, const std::string& path, const TokenizerInfo* tok,
                                   GgufDtype dtype) {
  const ModelConfig& c = model.config();
  const GgufArchitecture& arch = gguf_architecture_for(c, path);
  GgufModelWritten written;
  written.architecture = arch.name;
  written.note = gguf_window_note(arch, c);
  const std::vector<GgufSlot> slots = slots_of(model.base(), arch);
  std::vector<GgmlType> types, matrix_types;
  std::vector<std::vector<int64_t>> shapes;
  for (const GgufSlot& slot : slots) {
    const std::vector<int64_t> shape = slot_shape(model.base(), slot);
    types.push_back(tensor_type(shape, slot.gguf, dtype, c.tie_word_embeddings));
    if (shape.size() > 1) matrix_types.push_back(types.back());
  }
  written.file_type = held_dtype(matrix_types, dtype);

  std::vector<GgufKV> kvs = {
      {"general.architecture", GgufValue::str(arch.name)},
      {"general.name", GgufValue::str(std::filesystem::path(path).stem().string())},
      {"general.file_type", GgufValue::u32(file_type(written.file_type))},
  };
  for (GgufKV& kv : gguf_hparam_kvs(arch, c)) kvs.push_back(std::move(kv));
  // The ggml quantisation format version llama-quantize stamps on quantised files (2 since
  // ggml's Q4_0 / Q8_0 took their present block layouts): only where some matrix is quantised.
  if (std::any_of(matrix_types.begin(), matrix_types.end(),
                  [](GgmlType t) { return t == GgmlType::q8_0 || t == GgmlType::q4_0; }))
    kvs.push_back({"general.quantization_version", GgufValue::u32(2)});
  if (tok) append_tokenizer_keys(kvs, *tok, c.vocab_size, path);

  std::vector<GgufTensorOut> tensors;
  std::vector<float> freqs;  // outlives the write (borrowed by its tensor)
  if (c.rope_scaling.factor > 0.0f && !c.rope_scaling.linear) {  // llama3's; linear is a key (gemma3)
    freqs = rope_freq_factors(c);
    tensors.push_back({"rope_freqs.weight", {int64_t(freqs.size())}, GgmlType::f32, freqs.data(), {}});
  }
  for (size_t k = 0; k < slots.size(); ++k) {
    if (types[k] == GgmlType::f16 && dtype != GgufDtype::f16) written.kept_f16.push_back(slots[k].gguf);
    tensors.push_back(model_tensor(model.base(), arch, slots[k], types[k], c));
  }
  write_gguf(path, kvs, tensors);
  return written;
}

void export_gguf_lora(Transformer& model, const std::string& path, const std::string& base_name) {
  if (!model.has_lora()) fail(path + ": the model has no LoRA adapters to export");
  const ModelConfig& c = model.config();
  const GgufArchitecture& arch = gguf_architecture_for(c, path);
  if (c.tie_word_embeddings && lora_targets_head(model.lora_config()))
    fail(path + ": an lm_head adapter on a tied-embedding model has no output.weight in llama.cpp; "
         "merge the adapters and export the full model instead");
  // llama.cpp scales by alpha / rank only when alpha is non-zero and by 1 otherwise, so an
  // adapter that is inert here (alpha 0) would be applied at full strength there.
  if (!(model.lora_config().alpha > 0.0f))
    fail(path + ": LoRA alpha must be > 0 for GGUF (llama.cpp reads alpha 0 as scale 1)");
  if (model.lora_config().train_router)
    fail(path + ": the adapter trains the routers (lora.train_router, PEFT's modules_to_save), and a "
         "llama.cpp LoRA adapter holds lora_a / lora_b pairs only; export the merged model with --gguf");
  if (model.lora_config().train_embeddings)
    fail(path + ": the adapter trains the embedding and head of a grown vocabulary (data.add_tokens, "
         "PEFT's modules_to_save), and a llama.cpp LoRA adapter holds lora_a / lora_b pairs only and "
         "cannot add tokens; export the merged model with --gguf");
  std::vector<GgufKV> kvs = {
      {"general.architecture", GgufValue::str(arch.name)},  // llama.cpp refuses an adapter of another
      {"general.type", GgufValue::str("adapter")},
      {"general.name", GgufValue::str(base_name)},
      {"adapter.type", GgufValue::str("lora")},
      // llama.cpp scales by alpha / rank and knows no rsLoRA, so write the alpha that gives our scale.
      {"adapter.lora.alpha", GgufValue::f32(model.lora_config().scale() * float(model.lora_config().rank))},
  };
  std::vector<GgufTensorOut> tensors;
  std::vector<std::string> expert_bases;  // the experts' adapted projections (A's base names)
  for (const Param& p : model.adapters().params()) {
    // "<module>.lora_A.weight" -> base "<module>.weight" -> "<gguf base>.lora_a"
    const bool is_a = p.name.find(".lora_A.weight") != std::string::npos;
    const std::string module = p.name.substr(0, p.name.rfind(is_a ? ".lora_A.weight" : ".lora_B.weight"));
    const std::string base = module + ".weight";
    const auto gguf_base = gguf_name_of(arch, base);
    if (gguf_base && gguf_stacks_experts(arch, *gguf_base)) {
      if (is_a) expert_bases.push_back(base);
      continue;
    }
    // llama.cpp's tensor stacks this projection with others (GPT-2's attn_qkv, whose adapter
    // c_attn is also one): an adapter there would be one pair over all of them, not ours.
    if (!gguf_base || hf_names_of_gguf_tensor(arch, *gguf_base).size() > 1)
      fail(path + ": the adapter " + p.name + " has no tensor of its own in llama.cpp's " + arch.name +
           " architecture (it stacks q, k and v in one), so it is not written as a GGUF adapter; "
           "merge the adapters and export the full model instead");
    // Only B's rows are the projection's output rows, so only B takes the rotary permutation.
    const int64_t heads = is_a ? 0 : gguf_rotary_heads(arch, base, c);
    tensors.push_back(lazy_tensor(model.adapters(), p, gguf_tensor_name(arch, base) + (is_a ? ".lora_a" : ".lora_b"),
                                  GgmlType::f32, heads, c));
  }
  // A stack of experts takes its experts' adapters stacked alike, lora_a [experts, rank, in] and
  // lora_b [experts, out, rank], as llama.cpp applies an adapter to ffn_*_exps per expert (its
  // mul_mat_id over each); every expert of the stack must have one.
  const std::vector<GgufSlot> expert_slots = gguf_slots(arch, expert_bases);
  for (const GgufSlot& slot : expert_slots) {
    if (int64_t(slot.parts.size()) != c.num_experts)
      fail(path + ": " + std::to_string(slot.parts.size()) + " of the " + std::to_string(c.num_experts) +
           " experts of " + slot.gguf + " have adapters; llama.cpp's adapter of it covers every expert");
    for (const char* side : {"A", "B"})
      tensors.push_back(stacked_adapter(model.adapters(), slot, side));
  }
  write_gguf(path, kvs, tensors);
}

}  // namespace mt
