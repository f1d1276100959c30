// [[data.sources]]: several training files mixed by weight (train/mixed_data.h reads them). The
// struct lives apart from run_config.h's other sections so the mixer's files need only this.
#pragma once
#include <string>
#include <vector>

namespace mt {

struct DataSource {
  std::string path;             // the file; in a config file, relative to the file
  std::string format = "auto";  // as data.format
  // Relative: the source's share of the training rows is weight / (the sum of the weights).
  float weight = 1.0f;
  // Which part of the file trains: "train", the whole file less its held-out tail
  // (data.val_fraction), which joins the validation set. The only split a local file has.
  std::string split = "train";
  // "field=column" entries as data.columns; empty: data.columns.
  std::vector<std::string> columns;
  bool operator==(const DataSource&) const = default;
};

// The keys a source table may hold, in the order run.toml writes them.
inline constexpr const char* kDataSourceKeys[] = {"path", "format", "weight", "split", "columns"};

// The first problem with the sources ("data.sources: source 2 ('b.jsonl'): weight must be > 0,
// got 0"), or "" when none. Per source: a path, a known format, a finite weight > 0, split
// "train"; no two sources the same file read the same way.
std::string check_data_sources(const std::vector<DataSource>& sources);

}  // namespace mt
