// Writes the seed corpus for fuzz_safetensors_index into the directory given as argv[1]: index
// files for the target's fixed shards, as Hugging Face writes them, valid and near-valid.
#include <fstream>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::string dir = argv[1];
  auto seed = [&](const char* name, const char* text) { std::ofstream(dir + "/" + name) << text; };
  seed("index.json", R"({"metadata": {"total_size": 36, "format": "pt"}, "weight_map": {
    "a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
    "c": "model-00002-of-00002.safetensors"}})");
  seed("two_shards.json", R"({"weight_map": {"a": "other.safetensors", "b": "model-00001-of-00002.safetensors"}})");
  seed("missing.json", R"({"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
    "c": "model-00002-of-00002.safetensors", "d": "model-00002-of-00002.safetensors"}})");
  seed("path.json", R"({"weight_map": {"c": "../model-00002-of-00002.safetensors"}})");
  return 0;
}
