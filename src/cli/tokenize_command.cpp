// meshtrain tokenize --tokenizer PATH (--text STR | --input FILE|-) [--bos] [--eos] [--specials]
// With --text: the token ids of that text as a JSON list, e.g. [2028, 374, 264, 1296, 11914, 13].
// With --input (or neither: standard input): one text per line in, one JSON line per text out,
// {"text": "...", "ids": [...]}, which `meshtrain detokenize` reads back.
#include <algorithm>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/chunked_encode.h"
#include "cli/commands.h"
#include "cli/input_lines.h"
#include "cli/model_tokenizer.h"
#include "core/error.h"

namespace mt::cli {
namespace {

// The longest input line: memory is the line, and what encoding a part of it costs. A part is
// ~1 MiB of prose (chunked_encode.h), but a run without a place to cut it (16 MiB of letters, no
// space) is one BPE piece, whose merge takes ~40 bytes a byte: 640 MB at this limit.
constexpr size_t kLineLimit = size_t(16) << 20;

// `text` (valid UTF-8) as a JSON string, escaped a part at a time (parts cut between UTF-8
// characters), so the escaped copy costs a part, not the text.
void write_json_string(std::ostream& out, std::string_view text) {
  out << '"';
  for (size_t begin = 0; begin < text.size();) {
    size_t end = std::min(text.size(), begin + kEncodeChunkBytes);
    while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
    const std::string quoted = nlohmann::json(std::string(text.substr(begin, end - begin))).dump();
    out.write(quoted.data() + 1, std::streamsize(quoted.size() - 2));
    begin = end;
  }
  out << '"';
}

}  // namespace

Action add_tokenize_command(CLI::App& app) {
  struct Options {
    std::string tokenizer, text, input;
    bool bos = false, eos = false, specials = false;
  };
  auto opt = std::make_shared<Options>();
  auto* sub = app.add_subcommand(
      "tokenize", "Print the token ids of a text as a JSON list, or of each line of a file or standard input "
                  "as JSON lines {\"text\", \"ids\"}");
  sub->add_option("--tokenizer,-t", opt->tokenizer,
                  "Tokenizer file or directory (tiktoken, tokenizer.json, sentencepiece .model, GPT-2, "
                  "llama2.c .bin, or a GGUF file's own)")
      ->required();
  CLI::Option* text = sub->add_option("--text", opt->text, "Text to encode, printed as one JSON list (default: none, the texts of --input)");
  sub->add_option("--input,-i", opt->input,
                  "File of texts, one per line (\"-\": standard input; a line ending \\r\\n counts as \\n); prints "
                  "one JSON line per text, {\"text\": ..., \"ids\": [...]} (default: standard input, without --text)")
      ->excludes(text);
  sub->add_flag("--bos", opt->bos, "Start with the BOS token");
  sub->add_flag("--eos", opt->eos, "End with the EOS token");
  sub->add_flag("--specials", opt->specials, "Encode special-token strings as their ids");
  return [opt, text] {
    auto tok = load_any_tokenizer(opt->tokenizer);
    auto need = [&](int32_t id, const char* what) {
      if (id < 0) fail(opt->tokenizer + ": this tokenizer has no " + what + " token");
      return id;
    };
    const int32_t bos = opt->bos ? need(tok->bos_id(), "BOS") : -1;
    const int32_t eos = opt->eos ? need(tok->eos_id(), "EOS") : -1;
    // The ids of `s` written as `before` + id, `separator` + id, ...: a part of the text at a time
    // (chunked_encode.h), so a long line never has all its ids in memory at once.
    auto write_ids = [&](std::string_view s, const char* separator) {
      const char* before = "";
      auto write = [&](int32_t id) {
        std::cout << before << id;
        before = separator;
      };
      if (opt->bos) write(bos);
      encode_in_chunks(*tok, s, opt->specials, [&](const std::vector<int32_t>& ids) {
        for (int32_t id : ids) write(id);
      });
      if (opt->eos) write(eos);
    };
    if (text->count() > 0) {
      std::cout << '[';
      write_ids(opt->text, ", ");
      std::cout << "]\n";
      return 0;
    }
    const std::string input = opt->input.empty() ? "-" : opt->input;
    for_each_input_line(input, kLineLimit, [&](std::string_view line, const std::string& where) {
      // JSON carries text as UTF-8: other bytes could not be written back as they are.
      if (!is_valid_utf8(line)) fail(where + ": the text is not valid UTF-8 (JSON lines carry UTF-8 text)");
      // {"text":"...","ids":[...]}, as nlohmann's dump() of that object writes it.
      std::cout << "{\"text\":";
      write_json_string(std::cout, line);
      std::cout << ",\"ids\":[";
      write_ids(line, ",");
      std::cout << "]}\n";
    });
    std::cout.flush();
    return 0;
  };
}

}  // namespace mt::cli
