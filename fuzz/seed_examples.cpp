// Writes the seed corpus for fuzz_examples into the directory given as argv[1]. Each seed is one
// options byte (see fuzz_examples.cpp: 0 auto format, .json; 64 .jsonl; 1 alpaca; 2 chat) and an
// Alpaca or chat file in the forms the reader accepts: a JSON array, JSON Lines, a bad record.
#include <fstream>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::string dir = argv[1];
  auto seed = [&](const char* name, char options, const std::string& text) {
    std::ofstream(dir + "/" + name, std::ios::binary) << options << text;
  };
  const std::string a = R"({"instruction": "Add", "input": "2 and 3", "output": "5"})";
  const std::string b = R"({"instruction": "Say hi", "input": null, "output": "hi"})";
  const std::string c = R"({"messages": [{"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi."}]})";
  seed("alpaca_array", 0, "[" + a + ",\n" + b + "]");
  seed("alpaca_lines", 64, a + "\n" + b + "\n\n" + R"({"instruction": 3, "output": "x"})" + "\n");
  seed("chat_array", 2, "[" + c + "]");
  seed("chat_lines", 64, c.substr(0, c.find('\n')) + c.substr(c.find('\n') + 5) + "\n" +
                             R"({"messages": [{"role": "tool", "content": "x"}]})" + "\n");
  seed("alpaca_cut", 1 + 8 + 4, "[" + a + "]");
  // Hostile shapes for the per-record bounded reader: an array nested far past the limit, a
  // deep record inside a good array, and a deep JSON Lines record.
  seed("deep_array", 0, std::string(1 << 16, '['));
  seed("deep_record", 0, "[" + a + ", " + std::string(4096, '[') + "]");
  seed("deep_line", 64, a + "\n" + std::string(4096, '{') + "\n");
  return 0;
}
