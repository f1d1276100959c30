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
// (chat_templates.h), each reading `messages` or ShareGPT `conversations` records. A chat file read
// with kAuto gets its tokenizer's template. kCompletion: {"prompt", "completion"} or {"input",
// "output"} records, the two texts back to back. kTextRecords: {"text"} records, each a document,
// cut into windows like plain text (train/training_data.cpp). New values go last: the token
// cache stores the number.
enum class DataFormat { kAuto, kAlpaca, kChat, kChatml, kGemma, kMistral, kCompletion, kTextRecords };
// "auto", "alpaca", "chat", "chatml", "gemma", "mistral", "completion", "text_records"
std::string_view format_name(DataFormat f);
bool is_chat_format(DataFormat f);
DataFormat parse_format(std::string_view name);  // mt::Error listing the choices
// The prompt template generate's --template names for data of this format: "alpaca", a chat
// template, or "none" (completion and text records have no template around the text).
std::string_view prompt_template_name(DataFormat f);

struct ChatMessage {
  std::string role;     // "system", "user", "assistant" or "tool"
  std::string content;  // "" where the record's content is null or absent (a turn of only tool calls)
  // The record's message as a JSON object, its keys in the file's order, when it holds more than a
  // string role and content: tool_calls, tool_call_id, name, reasoning_content or any other key. A
  // model's own chat template gets this object as the message, as transformers' apply_chat_template
  // passes the dict (data/chat_jinja.h); the built-in templates refuse what they cannot render.
  // "" for a plain message.
  std::string json = {};
};

// The Stanford Alpaca prompt (everything before the response), with or without the input block.
std::string alpaca_prompt(std::string_view instruction, std::string_view input);

// BOS (when the tokenizer has one) + prompt + output + EOS (when it has one); only the output
// and EOS are trained. Prompt and output are encoded separately (special-token text in the data
// stays plain text).
Example render_alpaca(const Tokenizer& tok, std::string_view instruction, std::string_view input,
                      std::string_view output);

// BOS (when the tokenizer has one) + prompt + completion + EOS (when it has one), the prompt
// untrained: the prompt / completion records, with no template between the two texts (as TRL
// joins non-conversational prompt-completion data). Encoded separately, as render_alpaca.
Example render_completion(const Tokenizer& tok, std::string_view prompt, std::string_view completion);
// BOS + text + EOS (each when the tokenizer has one), every token trained: one document of
// {"text"} records, whose tokens are later joined into one stream like a plain-text file.
Example render_document(const Tokenizer& tok, std::string_view text);

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
  // kAuto: from the first record's fields: "messages" or "conversations" -> the tokenizer's chat
  // template, "instruction" -> alpaca, "prompt" + "completion" or "input" + "output" ->
  // completion, "text" -> text_records; none of them: mt::Error listing the formats.
  DataFormat format = DataFormat::kAuto;
  // Longest example kept (normally train.seq_len); 0: no limit. A longer example is skipped and
  // counted, or cut to max_tokens when `truncate` is set (then skipped only if no trained token
  // is left to predict). Not for kTextRecords: a document longer than a row is cut into windows
  // later, never skipped.
  int64_t max_tokens = 0;
  bool truncate = false;
  // The model's max_position_embeddings (0: not known): the skip warning never suggests a longer
  // sequence length than this.
  int64_t model_limit = 0;
  bool quiet = false;  // do not print the skip warning (it is still returned)
  // data.columns: "field=column" entries, each reading a record's `column` as the format's
  // top-level `field` (instruction, input, output, prompt, completion, text, messages,
  // conversations), for files that name their fields otherwise. Part of the token cache key.
  std::vector<std::string> columns;
};

struct ExampleSet {
  std::vector<Example> examples;
  DataFormat format = DataFormat::kAuto;  // the format used (never kAuto)
  int64_t records = 0;   // records seen in the file
  int64_t skipped = 0;   // records not turned into an example (bad record or too long)
  int64_t too_long = 0;  // of the skipped, those longer than max_tokens
  std::string warning;   // the one-line summary printed for skips; empty when none
};

// The fields data.columns may rename (chosen and rejected: preference pairs', data/preference_pairs.h),
// and the check of its entries: mt::Error naming a bad one (not "field=column", an unknown field,
// a field or column given twice).
inline constexpr const char* kRenamableFields[] = {"instruction", "input",    "output",        "prompt",
                                                   "completion",  "text",     "messages",      "conversations",
                                                   "chosen",      "rejected"};
void check_columns(const std::vector<std::string>& columns);

// Reads a file of records (Alpaca, chat, ShareGPT, completion or text): a .json file holding a JSON array of records, or JSON Lines
// (one object per line; .jsonl, or a .json file whose first character is not '['). Malformed
// JSON, a record that is not a JSON object, and unusable files: mt::Error naming the file and
// line (JSONL) or record and byte offset (array). The file is read a record at a time
// (json_records.h). Records that lack a required field, have a wrong type, or are too long are
// skipped and counted; one warning line "warning: <file>: N of M records skipped (...)" goes
// to stderr unless options.quiet.
ExampleSet read_examples(const std::string& path, const Tokenizer& tok,
                         const ExampleOptions& options = {});
// The format read_examples gives a file with format kAuto, from its first record alone: alpaca,
// completion, text_records, or for a chat file default_chat_format(*tok) (kChat without a
// tokenizer). Nothing is tokenized.
// The same errors as read_examples for an unusable file.
// `columns` as ExampleOptions::columns.
DataFormat example_file_format(const std::string& path, const Tokenizer* tok = nullptr,
                               const std::vector<std::string>& columns = {});
// The same on the file's text already in memory; `path` names it in messages, and its extension
// tells JSON Lines (.jsonl) as above.
ExampleSet parse_examples(const std::string& text, const std::string& path, const Tokenizer& tok,
                          const ExampleOptions& options = {});

}  // namespace mt
