// The rotary position embedding's frequencies and its cos/sin tables: host math, computed once per
// model and shared by every backend (which uploads the tables) and by the GGUF exporter (which
// stores the llama3 frequency factors). The rotation itself is a backend op.
#pragma once
#include <cstdint>

namespace mt {

struct RopeScaling {  // Llama 3.1 "llama3" frequency scaling; factor 0 means none
  float factor = 0.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int64_t original_max_position_embeddings = 8192;
  // transformers' "linear" type instead (Gemma 3's global layers): every frequency divided by
  // factor; the llama3 fields above are then unused.
  bool linear = false;
};

// inv_freq: [D/2], the per-pair frequencies, with llama3 scaling applied when factor > 0.
void rope_inv_freq(float* inv_freq, int64_t D, float theta, const RopeScaling& scaling);
// cos/sin tables: [max_pos, D/2]
void rope_tables(float* cos, float* sin, int64_t max_pos, int64_t D, float theta,
                 const RopeScaling& scaling);

}  // namespace mt
