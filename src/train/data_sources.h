// [[data.sources]]: several training files mixed by weight (train/mixed_data.h reads them). The
// struct lives apart from run_config.h's other sections so the mixer's files need only this.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace mt {

struct DataSource {
  std::string path;             // the file; in a config file, relative to the file
  std::string format = "auto";  // as data.format
  // Relative: the source's share of the training rows is weight / (the sum of the weights).
  float weight = 1.0f;
  // Which part of the file the source is: "train", the whole file, or a slice of it as HF
  // datasets writes one: percentages of its records (or of a plain-text file's tokens), in file
  // order, "train[:90%]", "train[10%:]", "train[10%:20%]", or counts of its records,
  // "train[:1000]", "train[100:200]", "train[-500:]" (negative: from the end). Its held-out tail
  // (data.val_fraction) joins the validation set.
  std::string split = "train";
  // "field=column" entries as data.columns; empty: data.columns.
  std::vector<std::string> columns;
  bool operator==(const DataSource&) const = default;
};

// A split: [begin, end) of a file's n items, each end a percentage of them (the item
// floor(n x percent / 100)) or, where *_rows, a count of them; either one negative counts from
// the end, as Python's slices do. So "train[:50%]" and "train[50%:]" share none and miss none.
struct SplitRange {
  double begin = 0, end = 100;
  bool begin_rows = false, end_rows = false;
  std::string text = "train";  // as written
  bool whole() const;
  size_t first(size_t n) const;
  size_t last(size_t n) const;
  // "" when the slice fits n items, else why not, naming them with `items` ("examples"): a count
  // beyond n, or a slice that holds none of them.
  std::string misfit(size_t n, const std::string& items) const;
};
// DataSource::split read; nullopt when it is not one of its forms.
std::optional<SplitRange> parse_split(const std::string& split);
// Why `split` is not one of DataSource::split's forms, in words after "split ": one line.
std::string split_problem(const std::string& split);

// The keys a source table may hold, in the order run.toml writes them.
inline constexpr const char* kDataSourceKeys[] = {"path", "format", "weight", "split", "columns"};

// The first problem with the sources ("data.sources: source 2 ('b.jsonl'): weight must be > 0,
// got 0"), or "" when none. Per source: a path, a known format, a finite weight > 0, a split
// parse_split reads; no two sources the same file read the same way.
std::string check_data_sources(const std::vector<DataSource>& sources);

}  // namespace mt
