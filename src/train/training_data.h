// The data of a training run, whatever its form: plain text (a file, or the documents of
// {"text"} records) cut into random windows, or instruction / chat / completion examples packed
// into rows (with per-example positions and segments and loss
// only on responses). Both come out as PackedBatch so the loop has one shape to handle.
#pragma once
#include <memory>
#include <ostream>
#include <string>

#include "data/packing.h"
#include "data/text_dataset.h"
#include "data/tokenizer.h"
#include "model/transformer.h"
#include "train/run_config.h"

namespace mt {

class TrainingData {
 public:
  virtual ~TrainingData() = default;
  virtual PackedBatch next() = 0;
  virtual SamplerState state() const = 0;
  virtual void restore(const SamplerState& s) = 0;
  // Fixed validation batches: next_validation() until it returns false, then reset_validation().
  virtual bool has_validation() const = 0;
  virtual bool next_validation(PackedBatch& out) = 0;
  virtual void reset_validation() = 0;
  // Rows (of train.seq_len tokens) one validation reads: at most validation_rows(cfg.train).
  virtual int64_t num_validation_rows() const = 0;
  virtual std::string describe() const = 0;  // one line for the log
  // Rows (sequences of seq_len tokens) in one pass over the training split, for train.epochs:
  // the first epoch's packed rows of examples, or the train tokens / seq_len of plain text.
  virtual int64_t rows_per_epoch() const = 0;
  // The prompt template of this data, as generate's --template names it: "none" (plain text),
  // "alpaca" or "chat".
  virtual std::string prompt_template() const = 0;
};

// The validation budget in rows: ceil(train.eval_tokens / train.seq_len).
int64_t validation_rows(const TrainConfig& tc);

// Whether a data file is read as instruction / chat examples rather than plain text, given
// data.format ("auto": a .json or .jsonl file is examples).
bool is_example_data(const std::string& path, const std::string& format);
// mt::Error when data.format = "text" names a .json / .jsonl file: read as plain text, its braces
// and field names would be trained on; the message names text_records.
void refuse_text_format_on_records(const std::string& path, const std::string& format);
// Opens cfg.data with `tok`; progress and warnings (skipped records, cache use) go to `log`.
std::unique_ptr<TrainingData> open_training_data(const RunConfig& cfg, const Tokenizer& tok,
                                                 std::ostream& log);
// The prompt template of cfg.data (as TrainingData::prompt_template) without opening the data:
// only data.format "auto" on a .json/.jsonl file reads the file's records to tell alpaca from chat.
std::string prompt_template_of(const RunConfig& cfg);
// Where a run's tokenizer comes from (see DataConfig::tokenizer): a file or directory, or empty
// for the byte-level tokenizer.
std::string tokenizer_source(const RunConfig& cfg);
// The Jinja text of data.chat_template, the user's template the run renders conversations with;
// "" when the run uses the tokenizer's own or a built-in one. It goes with what the run saves: a
// model's or a grown adapter's tokenizer_config.json, an adapter's meshtrain_template.json.
std::string user_chat_template(const RunConfig& cfg);
// The tokenizer a run uses.
std::unique_ptr<Tokenizer> run_tokenizer(const RunConfig& cfg);
// The model's input view of a batch (null positions/segments when the batch has none).
ModelInput input_of(const PackedBatch& b);

}  // namespace mt
