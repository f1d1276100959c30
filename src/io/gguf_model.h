// A GGUF model as a model to start from (io/pretrained.h loads *.gguf through this): the
// architecture (io/gguf_architectures.h) from its metadata and the parts of its block from the
// tensors it holds (a mixture of experts from <arch>.expert_count, its stacks split per expert), the weights F32 / F16 / BF16 widened and Q8_0 / Q4_0
// dequantised, q and k rows of a llama file permuted back to the model's rotate-half layout.
// So `meshtrain generate` / `eval` run the very numbers llama.cpp runs from a quantised file.
// What export_gguf_model writes reads back; so does a llama.cpp file of those architectures and
// types. A window the source model had is not in the file (llama.cpp has none for these
// architectures), so the model reads back without it, as llama.cpp computes it.
// The whole file is read into memory (io/gguf_reader.h): meant for checking exports, not for
// models larger than the host's memory.
#pragma once
#include <string>

#include "io/gguf_reader.h"
#include "model/transformer.h"

namespace mt {

// The model's config (general.architecture one of gguf_architectures()), with every base tensor
// checked against it; absent output.weight means tied embeddings; a llama file with an explicit
// head dim reads as mistral (an HF llama config cannot hold one). mt::Error naming the file for anything
// else, including llama3 rope scaling (rope_freqs.weight), whose parameters the file does not keep.
ModelConfig gguf_model_config(const GgufFile& g);
// Loads the base weights into a model built from gguf_model_config.
void load_gguf_weights(const GgufFile& g, Transformer& model);

}  // namespace mt
