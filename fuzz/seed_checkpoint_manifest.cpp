// Writes the seed corpus for fuzz_checkpoint_manifest into the directory given as argv[1]:
// manifests as save_checkpoint writes them (with checksums, the target's shard verifying; without
// them, as before checksums), and a LoRA one whose checksum does not match.
#include <fstream>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::string dir = argv[1];
  const std::string head = R"({
  "format": "meshtrain-checkpoint",
  "version": 2,
  "step": 8,
  "sampler": {"seed": 1234, "rows_drawn": 16},
  "optimizer_steps": 8,
  "mesh": "dp=1",
  "tensors": [{"name": "layers.0.attn.q_proj.weight", "shape": [64, 64]}],
  "files": ["shard-00000.safetensors"],
  "config": "[train]\nsteps = 8\n",)";
  std::ofstream(dir + "/full.json") << head << R"(
  "lora": false,
  "crc32c": {"shard-00000.safetensors": "e3069283"}
})";
  std::ofstream(dir + "/unchecked.json") << head << R"(
  "lora": false
})";
  std::ofstream(dir + "/lora.json") << head << R"(
  "lora": true,
  "crc32c": {"shard-00000.safetensors": "0123abcd"}
})";
  std::ofstream(dir + "/deep.json") << std::string(1 << 16, '[');  // refused by the depth limit
  return 0;
}
