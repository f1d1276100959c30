// [[data.sources]]: several training files, each read in its own format, mixed into one stream of
// rows by weight (docs/data.md, "Mixing datasets"). A source's share of the training rows is its
// weight over the sum of the weights, held in every prefix of the stream to within (sources - 1)
// rows (data/source_mix.h); each source is read by its own sampler (shuffled per epoch with a seed of
// its own, its epochs repeating as often as its share asks), and the stream's state is the one
// count of rows drawn, as a single file's.
#pragma once
#include <functional>
#include <memory>
#include <ostream>

#include "train/training_data.h"

namespace mt {

// Opens one file as the single-file path does (training_data.cpp), for a config whose data.path,
// data.format and data.columns are the source's, keeping the part of it the source's split names.
using OpenOneSource = std::function<std::unique_ptr<TrainingData>(const RunConfig&, const SplitRange&)>;

// The config source `i` of cfg.data.sources is read with: cfg with the source's path, format and
// columns (data.columns when it gives none), batches of one row, its own seed (source_seed), and
// its share of the validation budget (ceil(validation_rows x share) rows).
RunConfig source_config(const RunConfig& cfg, size_t i, double share);
// The seed of source `i`'s sampler and train/validation split: the run's seed mixed with the
// source's place, so two sources of the same size are not shuffled alike.
uint64_t source_seed(uint64_t seed, size_t i);

// cfg.data.sources opened each with `open_one` and mixed; what each holds and its share go to
// `log`, one line a source.
std::unique_ptr<TrainingData> open_mixed_data(const RunConfig& cfg, std::ostream& log, const OpenOneSource& open_one);

}  // namespace mt
