// Preference pairs for DPO-style training (DPO, IPO, SimPO, ORPO): a JSON or JSON Lines file of
// records {"prompt", "chosen", "rejected"} read into two token sequences per pair, the chosen and the
// rejected answer to the same prompt, with the prompt masked out of the loss. The record layouts are
// TRL's (its DPOTrainer reads the same files):
//   standard        {"prompt": "...", "chosen": "...", "rejected": "..."}: plain text (BOS + prompt,
//                   then answer + EOS), or with format alpaca the Alpaca prompt render_alpaca writes,
//                   or with a chat format one user message and one assistant answer
//   conversational  "chosen"/"rejected" are message lists; "prompt" is a message list, a string (one
//                   user message) or absent: then the longest common leading run of messages of the
//                   two is the prompt (TRL's extract_prompt, Anthropic HH style). Rendered with the
//                   chat template; only the messages after the prompt are trained (the prompt's own
//                   assistant turns are not).
// Bad records are skipped and counted like read_examples' (examples.h); broken JSON is an error.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/examples.h"
#include "data/tokenizer.h"

namespace mt {

// TRL 0.11's DPOTrainer.tokenize_row truncation: when prompt + the longer completion exceed
// max_length, the prompt is cut to max_prompt_length tokens (keep_end: its last ones, TRL's default;
// keep_start: its first ones); if still too long, each completion is cut to
// max_length - max_prompt_length tokens (its end dropped).
enum class TruncationMode { kKeepEnd, kKeepStart };
std::string_view truncation_mode_name(TruncationMode mode);  // "keep_end", "keep_start"
TruncationMode parse_truncation_mode(std::string_view name);  // mt::Error listing the choices

struct PreferenceOptions {
  // How prompts are rendered: kAuto gives a file of string pairs plain text and a file of message
  // lists the tokenizer's chat template (default_chat_format); kAlpaca renders string prompts as
  // render_alpaca does; a chat format renders every record with that template.
  DataFormat format = DataFormat::kAuto;
  int64_t max_length = 0;         // each sequence's limit in tokens (train.seq_len); 0 = none
  int64_t max_prompt_length = 0;  // 0: max_length / 4 (TRL's 128 of 512); must be < max_length
  TruncationMode truncation = TruncationMode::kKeepEnd;
  bool quiet = false;  // no warning to stderr (it is still returned)
  // data.columns: "field=column" entries, each reading a record's `column` as the pair's `field`
  // (prompt, chosen, rejected), as for examples (check_columns in data/examples.h).
  std::vector<std::string> columns;
};

struct PreferenceSet {
  // Two per pair, in file order: sequences[2p] the chosen, sequences[2p+1] the rejected; each is the
  // prompt's tokens (trained 0) followed by the completion's (trained 1; its closing EOS /
  // end-of-turn token trained too). Both sequences of a pair start with the same prompt tokens.
  std::vector<Example> sequences;
  DataFormat format = DataFormat::kAuto;  // what rendered them: kAlpaca, a chat format, or kAuto: plain text
  int64_t records = 0;    // records seen in the file
  int64_t skipped = 0;    // records not turned into a pair
  int64_t truncated = 0;  // pairs cut by the rule above (kept)
  std::string warning;    // one line when records were skipped or truncated, else empty
  size_t pairs() const { return sequences.size() / 2; }
};

// Reads a .json file (a JSON array of records, or JSON Lines when it does not start with '[') or a
// .jsonl file. mt::Error naming the file for a missing/empty file, malformed JSON (with the line, or
// the byte offset in an array), a file none of whose records has "chosen" and "rejected", a file
// with no usable pair, a tokenizer lacking the chat template's special tokens, or bad options.
// One warning line "warning: data file '<path>': N of M records skipped (first: <where>: <why>);
// K pairs truncated to L tokens" goes to stderr unless options.quiet.
PreferenceSet read_preference_pairs(const std::string& path, const Tokenizer& tok,
                                    const PreferenceOptions& options = {});
// The same on the file's text already in memory; `path` names it in messages, and its extension
// tells JSON Lines (.jsonl) as above.
PreferenceSet parse_preference_pairs(const std::string& text, const std::string& path, const Tokenizer& tok,
                                     const PreferenceOptions& options = {});
// Whether a .json/.jsonl file's records are preference pairs (its first record has "chosen" and
// "rejected"); false for other extensions and for blank files. mt::Error for a file that cannot
// be read or whose first record is malformed or not a JSON object.
bool is_preference_file(const std::string& path);
// The format read_preference_pairs gives the file with format kAuto, from its first preference
// record alone, nothing tokenized: kAuto (string pairs: plain text), or for message lists
// default_chat_format(*tok) (kChat without a tokenizer). The same errors as read_preference_pairs
// for an unusable file (missing, empty, malformed before that record, no preference record).
// `columns` as PreferenceOptions::columns.
DataFormat preference_file_format(const std::string& path, const Tokenizer* tok = nullptr,
                                  const std::vector<std::string>& columns = {});

}  // namespace mt
