// Writes the seed corpus for fuzz_preference_pairs into the directory given as argv[1]. Each seed is
// one options byte (see fuzz_preference_pairs.cpp: 0 auto format, .json; 64 .jsonl; 1 alpaca; 2
// chat; 8 and 16 length limits; 4 keep_start; 128 a 5-token prompt limit) and a preference file in
// the forms the reader accepts: string pairs, message lists with an explicit, a string or an
// implicit prompt, JSON arrays and JSON Lines, bad records.
#include <fstream>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::string dir = argv[1];
  auto seed = [&](const char* name, unsigned char options, const std::string& text) {
    std::ofstream(dir + "/" + name, std::ios::binary) << char(options) << text;
  };
  const std::string s = R"({"prompt": "Who is the baker?", "chosen": "Mira.", "rejected": "Odo."})";
  const std::string t = R"({"prompt": "Say hi", "chosen": "hi there, friend", "rejected": 3})";
  const std::string e =
      R"({"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],)"
      R"( "chosen": [{"role": "assistant", "content": "Hello."}], "rejected": [{"role": "assistant", "content": "Go."}]})";
  const std::string i =
      R"({"chosen": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."},)"
      R"( {"role": "user", "content": "Who bakes?"}, {"role": "assistant", "content": "Mira."}],)"
      R"( "rejected": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."},)"
      R"( {"role": "user", "content": "Who bakes?"}, {"role": "assistant", "content": "No idea."}]})";
  const std::string p =
      R"({"prompt": "Who rows?", "chosen": [{"role": "assistant", "content": "Odo."}], "rejected": [{"role": "assistant", "content": "Me."}]})";
  seed("strings_array", 0, "[" + s + ",\n" + t + "]");
  seed("strings_lines", 64, s + "\n" + t + "\n\n" + R"({"chosen": "x"})" + "\n");
  seed("alpaca_cut", 1 + 8 + 64, s + "\n" + s + "\n");
  seed("alpaca_keep_start", 1 + 8 + 4 + 128, "[" + s + "]");
  seed("chat_explicit", 2 + 64, e + "\n" + p + "\n");
  seed("chat_implicit", 0 + 16, "[" + i + ", " + e + "]");
  seed("chat_cut", 2 + 8 + 128 + 64, i + "\n" + p + "\n");
  seed("mixed", 0 + 64, s + "\n" + i + "\n[1]\n");
  // Hostile shapes for the per-record bounded reader: an array nested far past the limit, a deep
  // record inside a good array, and a deep JSON Lines record.
  seed("deep_array", 0, std::string(1 << 16, '['));
  seed("deep_record", 0, "[" + s + ", " + std::string(4096, '[') + "]");
  seed("deep_line", 64, s + "\n" + std::string(4096, '{') + "\n");
  return 0;
}
