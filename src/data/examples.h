// Instruction-tuning examples: Alpaca records and chat conversations rendered into token ids
// with a per-token mask of which tokens the loss trains on (prompt masking). See
// docs/data.md for the formats and templates.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer.h"

namespace mt {

struct Example {
  std::vector<int32_t> tokens;
  // trained[i] = 1 when token i is response/assistant text (or its closing EOS/<|eot_id|>), so
  // predicting it from tokens[0..i-1] counts in the loss.
  std::vector<uint8_t> trained;
};

// kChat is the Llama 3.1 template; kChatml, kGemma and kMistral are the other chat templates
// (chat_templates.h). A chat file read with kAuto gets its tokenizer's template.
enum class DataFormat { kAuto, kAlpaca, kChat, kChatml, kGemma, kMistral };
std::string_view format_name(DataFormat f);  // "auto", "alpaca", "chat", "chatml", "gemma", "mistral"
bool is_chat_format(DataFormat f);
DataFormat parse_format(std::string_view name);  // mt::Error listing the choices

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// The Stanford Alpaca prompt (everything before the response), with or without the input block.
std::string alpaca_prompt(std::string_view instruction, std::string_view input);

// BOS (when the tokenizer has one) + prompt + output + EOS (when it has one); only the output
// and EOS are trained. Prompt and output are encoded separately (special-token text in the data
// stays plain text).
Example render_alpaca(const Tokenizer& tok, std::string_view instruction, std::string_view input,
                      std::string_view output);

// The Llama 3.1 chat template:
//   <|begin_of_text|> then per message
//   <|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>
// The special tokens are ids; role and content are encoded as plain text. Only assistant content
// and its <|eot_id|> are trained. mt::Error naming the tokenizer kind when it lacks the Llama 3
// special tokens.
Example render_chat(const Tokenizer& tok, const std::vector<ChatMessage>& messages);
// The messages as render_chat writes them, then an open assistant header: what a model
// fine-tuned on chat data continues with its answer.
std::vector<int32_t> chat_generation_prompt(const Tokenizer& tok,
                                            const std::vector<ChatMessage>& messages);

struct ExampleOptions {
  // kAuto: "instruction" -> alpaca, "messages" -> the tokenizer's chat template
  DataFormat format = DataFormat::kAuto;
  // Longest example kept (normally train.seq_len); 0: no limit. A longer example is skipped and
  // counted, or cut to max_tokens when `truncate` is set (then skipped only if no trained token
  // is left to predict).
  int64_t max_tokens = 0;
  bool truncate = false;
  // The model's max_position_embeddings (0: not known): the skip warning never suggests a longer
  // sequence length than this.
  int64_t model_limit = 0;
  bool quiet = false;  // do not print the skip warning (it is still returned)
};

struct ExampleSet {
  std::vector<Example> examples;
  DataFormat format = DataFormat::kAuto;  // the format used (never kAuto)
  int64_t records = 0;   // records seen in the file
  int64_t skipped = 0;   // records not turned into an example (bad record or too long)
  int64_t too_long = 0;  // of the skipped, those longer than max_tokens
  std::string warning;   // the one-line summary printed for skips; empty when none
};

// Reads an Alpaca or chat file: a .json file holding a JSON array of records, or JSON Lines
// (one object per line; .jsonl, or a .json file whose first character is not '['). Malformed
// JSON, a record that is not a JSON object, and unusable files: mt::Error naming the file and
// line (JSONL) or record and byte offset (array). The file is read a record at a time
// (json_records.h). Records that lack a required field, have a wrong type, or are too long are
// skipped and counted; one warning line "warning: <file>: N of M records skipped (...)" goes
// to stderr unless options.quiet.
ExampleSet read_examples(const std::string& path, const Tokenizer& tok,
                         const ExampleOptions& options = {});
// The format read_examples gives a file with format kAuto, from its records alone: alpaca, or
// for a chat file default_chat_format(*tok) (kChat without a tokenizer). Nothing is tokenized.
// The same errors as read_examples for an unusable file.
DataFormat example_file_format(const std::string& path, const Tokenizer* tok = nullptr);
// The same on the file's text already in memory; `path` names it in messages, and its extension
// tells JSON Lines (.jsonl) as above.
ExampleSet parse_examples(const std::string& text, const std::string& path, const Tokenizer& tok,
                          const ExampleOptions& options = {});

}  // namespace mt
