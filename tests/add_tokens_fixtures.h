// The chat data the data.add_tokens tests train on: chatml records whose markers stories260K's
// tokenizer lacks (the tests add them).
#pragma once
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace mt::testing {

// <dir>/chat.jsonl: 48 short user questions with short assistant answers in TinyStories' words.
inline std::string write_tiny_chat(const std::filesystem::path& dir) {
  const std::string path = (dir / "chat.jsonl").string();
  std::ofstream out(path);
  const char* names[] = {"Lily", "Tom", "Sue", "Max", "Ben", "Mia", "Sam", "Amy"};
  const char* things[] = {"ball", "cat", "tree", "cake", "dog", "boat"};
  for (int i = 0; i < 48; ++i) {
    const std::string name = names[i % 8], thing = things[i % 6];
    nlohmann::json rec = {{"messages",
                           {{{"role", "user"}, {"content", "Who has the " + thing + "?"}},
                            {{"role", "assistant"}, {"content", name + " has the " + thing + ". " + name + " is happy."}}}}};
    out << rec.dump() << "\n";
  }
  return path;
}

}  // namespace mt::testing
