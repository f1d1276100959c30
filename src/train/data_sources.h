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
  // datasets writes one, "train[:90%]", "train[10%:]", "train[10%:20%]" (percentages of its
  // records, or of a plain-text file's tokens, in file order). Its held-out tail
  // (data.val_fraction) joins the validation set.
  std::string split = "train";
  // "field=column" entries as data.columns; empty: data.columns.
  std::vector<std::string> columns;
  bool operator==(const DataSource&) const = default;
};

// A split as percentages of the file: [begin, end), 0 <= begin < end <= 100. The items of a slice
// of n are [floor(n x begin / 100), floor(n x end / 100)), so "train[:50%]" and "train[50%:]"
// share none and miss none.
struct SplitRange {
  double begin = 0, end = 100;
  bool whole() const { return begin == 0 && end == 100; }
  size_t first(size_t n) const { return size_t(double(n) * begin / 100.0); }
  size_t last(size_t n) const { return end == 100 ? n : size_t(double(n) * end / 100.0); }
};
// DataSource::split read; nullopt when it is not one of its forms.
std::optional<SplitRange> parse_split(const std::string& split);

// The keys a source table may hold, in the order run.toml writes them.
inline constexpr const char* kDataSourceKeys[] = {"path", "format", "weight", "split", "columns"};

// The first problem with the sources ("data.sources: source 2 ('b.jsonl'): weight must be > 0,
// got 0"), or "" when none. Per source: a path, a known format, a finite weight > 0, a split
// parse_split reads; no two sources the same file read the same way.
std::string check_data_sources(const std::vector<DataSource>& sources);

}  // namespace mt
