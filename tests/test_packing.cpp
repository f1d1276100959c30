// Packing invariants, deterministic shuffling, resumable sampling and validation batches.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "data/byte_tokenizer.h"
#include "train/training_data.h"
#include "data/packed_sampler.h"
#include "data/shuffle.h"
#include "data_fixtures.h"
#include "model_fixtures.h"
#include "train/run_config.h"

namespace mt {
namespace {

using namespace mt::testdata;

// Synthetic examples of varied lengths: token values encode (example, index) so a misplaced
// token is visible; every other token trained.
ExampleTable synthetic(int n, int64_t max_len) {
  std::vector<Example> ex;
  for (int e = 0; e < n; ++e) {
    Example x;
    const int64_t len = 2 + (e * 7) % (max_len - 1);
    for (int64_t i = 0; i < len; ++i) {
      x.tokens.push_back(int32_t(1000 * (e + 1) + i));
      x.trained.push_back(uint8_t(i % 2));
    }
    ex.push_back(std::move(x));
  }
  return ExampleTable(ex);
}

std::vector<uint32_t> all_ids(size_t n) {
  std::vector<uint32_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = uint32_t(i);
  return ids;
}

// Checks the row invariants of a batch and returns the multiset of its counted targets and the
// number of example segments (padding excluded).
std::pair<std::multiset<int32_t>, int64_t> check_batch(const PackedBatch& b) {
  std::multiset<int32_t> targets;
  int64_t examples = 0;
  const int64_t L = b.seq_len;
  EXPECT_EQ(b.tokens.size(), size_t(b.batch_size * L));
  EXPECT_EQ(b.targets.size(), b.tokens.size());
  EXPECT_EQ(b.positions.size(), b.tokens.size());
  EXPECT_EQ(b.segments.size(), b.tokens.size());
  for (int64_t r = 0; r < b.batch_size; ++r) {
    const size_t base = size_t(r * L);
    for (int64_t t = 0; t < L; ++t) {
      const size_t at = base + size_t(t);
      const bool starts = t == 0 || b.segments[at] != b.segments[at - 1];
      if (starts) {
        EXPECT_EQ(b.positions[at], 0) << "row " << r << " t " << t;
        EXPECT_EQ(b.segments[at], t == 0 ? 0 : b.segments[at - 1] + 1);
        if (b.tokens[at] != 0) ++examples;  // padding is token 0
      } else {
        EXPECT_EQ(b.positions[at], b.positions[at - 1] + 1);
      }
      if (b.targets[at] >= 0) {
        EXPECT_LT(t + 1, L);
        if (t + 1 < L) {
          EXPECT_EQ(b.segments[at + 1], b.segments[at]) << "target crosses a segment";
          EXPECT_EQ(b.targets[at], b.tokens[at + 1]);
        }
        targets.insert(b.targets[at]);
      }
    }
  }
  return {targets, examples};
}

std::multiset<int32_t> trained_tokens(const ExampleTable& t, const std::vector<uint32_t>& ids) {
  std::multiset<int32_t> out;
  for (uint32_t id : ids)
    for (int64_t i = 1; i < t.length(id); ++i)
      if (t.trained(id)[size_t(i)]) out.insert(t.tokens(id)[size_t(i)]);
  return out;
}

bool same(const PackedBatch& a, const PackedBatch& b) {
  return a.tokens == b.tokens && a.targets == b.targets && a.positions == b.positions &&
         a.segments == b.segments && a.batch_size == b.batch_size && a.seq_len == b.seq_len;
}

TEST(DatasetPacking, InvariantsOnAlpacaTiny) {
  MT_REQUIRE_DATA("instruct/alpaca_tiny.json");
  MT_REQUIRE_DATA("stories260K/tok512.bin");
  const Tokenizer& tok = shared_tokenizer("stories260K/tok512.bin");
  const int64_t L = 512;  // most records fit; several short ones share a row
  ExampleOptions opt;
  opt.max_tokens = L;
  opt.quiet = true;
  ExampleSet set = read_examples(data_dir() + "instruct/alpaca_tiny.json", tok, opt);
  EXPECT_EQ(set.records, 100);
  EXPECT_EQ(int64_t(set.examples.size()) + set.skipped, 100);
  EXPECT_GT(set.examples.size(), 80u);
  ExampleTable table(set.examples);
  PackedSampler sampler(table, all_ids(table.size()), L, 1, 3);
  const int64_t rows = sampler.rows_in_epoch();
  EXPECT_LT(rows, int64_t(table.size()));  // several examples share a row
  PackedBatch b = make_packed_batch(rows, L);
  for (int64_t r = 0; r < rows; ++r) {
    PackedBatch one = sampler.next();
    std::copy(one.tokens.begin(), one.tokens.end(), b.tokens.begin() + r * L);
    std::copy(one.targets.begin(), one.targets.end(), b.targets.begin() + r * L);
    std::copy(one.positions.begin(), one.positions.end(), b.positions.begin() + r * L);
    std::copy(one.segments.begin(), one.segments.end(), b.segments.begin() + r * L);
  }
  EXPECT_EQ(sampler.epoch(), 0);
  auto [targets, examples] = check_batch(b);
  EXPECT_EQ(examples, int64_t(table.size()));  // every example exactly once per epoch
  EXPECT_EQ(targets, trained_tokens(table, all_ids(table.size())));
}

TEST(DatasetPacking, SyntheticRowsHoldWholeExamples) {
  ExampleTable table = synthetic(57, 20);
  RowPlan plan = plan_rows(table, all_ids(table.size()), 20);
  PackedBatch b = make_packed_batch(plan.num_rows(), 20);
  for (int64_t r = 0; r < plan.num_rows(); ++r) fill_row(b, r, table, plan.row(r));
  auto [targets, examples] = check_batch(b);
  EXPECT_EQ(examples, 57);
  EXPECT_EQ(targets, trained_tokens(table, all_ids(table.size())));
  // Next-fit: a row is closed only when the next example does not fit.
  for (int64_t r = 0; r + 1 < plan.num_rows(); ++r) {
    int64_t used = 0;
    for (uint32_t id : plan.row(r)) used += table.length(id);
    EXPECT_GT(used + table.length(plan.row(r + 1)[0]), 20);
  }
  ModelInput in = input_of(b);
  EXPECT_EQ(in.tokens, b.tokens.data());
  EXPECT_EQ(in.targets, b.targets.data());
  EXPECT_EQ(in.positions, b.positions.data());
  EXPECT_EQ(in.segments, b.segments.data());
  EXPECT_EQ(in.B, plan.num_rows());
  EXPECT_EQ(in.T, 20);
}

TEST(DatasetPacking, RejectsExampleLongerThanSeqLen) {
  ExampleTable table = synthetic(5, 30);
  std::string msg = error_of([&] { plan_rows(table, all_ids(5), 10); });
  EXPECT_NE(msg.find("longer than the sequence length 10"), std::string::npos) << msg;
}

TEST(DatasetPacking, ShuffleIsDeterministicBySeed) {
  auto a = shuffled_order(100, 7);
  EXPECT_EQ(a, shuffled_order(100, 7));
  EXPECT_NE(a, shuffled_order(100, 8));
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, all_ids(100));
  // Pinned: the order must not depend on the standard library or platform.
  EXPECT_EQ(shuffled_order(8, 42), (std::vector<uint32_t>{0, 3, 4, 6, 5, 2, 7, 1}));
  EXPECT_TRUE(shuffled_order(0, 1).empty());
}

TEST(DatasetPacking, SamplerDependsOnlyOnSeed) {
  ExampleTable table = synthetic(40, 16);
  PackedSampler a(table, all_ids(40), 32, 3, 11), b(table, all_ids(40), 32, 3, 11),
      c(table, all_ids(40), 32, 3, 12);
  bool differs = false;
  for (int i = 0; i < 10; ++i) {
    PackedBatch x = a.next(), y = b.next(), z = c.next();
    EXPECT_TRUE(same(x, y));
    differs |= !same(x, z);
  }
  EXPECT_TRUE(differs);
}

TEST(DatasetPacking, SamplerResumesAcrossEpochBoundary) {
  ExampleTable table = synthetic(40, 16);
  const int64_t B = 3;
  PackedSampler ref(table, all_ids(40), 32, B, 5);
  const int64_t rows0 = ref.rows_in_epoch();
  const int64_t before = rows0 / B - 1;  // the last batch wholly inside epoch 0
  ASSERT_GT(before, 0);
  for (int64_t i = 0; i < before; ++i) ref.next();
  const PackedSamplerState saved = ref.state();
  EXPECT_EQ(saved.epoch, 0);
  EXPECT_EQ(saved.row, before * B);
  std::vector<PackedBatch> want;
  for (int i = 0; i < 2 * rows0 / B + 3; ++i) want.push_back(ref.next());  // into epoch 2
  EXPECT_GE(ref.epoch(), 2);

  PackedSampler resumed(table, all_ids(40), 32, B, 999);
  resumed.restore(saved);
  PackedSampler from_plain(table, all_ids(40), 32, B, 999);
  from_plain.restore(SamplerState{5, before * B});  // rows, not batches
  for (const PackedBatch& w : want) {
    EXPECT_TRUE(same(resumed.next(), w));
    EXPECT_TRUE(same(from_plain.next(), w));
  }
  EXPECT_EQ(resumed.state().epoch, ref.state().epoch);
  EXPECT_EQ(resumed.state().row, ref.state().row);
  EXPECT_EQ(from_plain.state().row, ref.state().row);
  EXPECT_EQ(ref.sampler_state().rows_drawn, (before + int64_t(want.size())) * B);

  // Restoring at the exact end of an epoch, and rejecting a row beyond it.
  PackedSampler at_end(table, all_ids(40), 32, 1, 5);
  at_end.restore(SamplerState{5, rows0});
  EXPECT_EQ(at_end.state().epoch, 0);
  EXPECT_EQ(at_end.state().row, rows0);
  std::string msg = error_of([&] { at_end.restore(PackedSamplerState{5, 0, rows0 + 1, 0}); });
  EXPECT_NE(msg.find("cannot restore row"), std::string::npos) << msg;
}

TEST(DatasetPacking, NewEpochReshuffles) {
  ExampleTable table = synthetic(40, 16);
  PackedSampler s(table, all_ids(40), 16, 1, 9);
  std::vector<int32_t> first0, first1;
  const int64_t rows0 = s.rows_in_epoch();
  for (int64_t r = 0; r < rows0; ++r) first0.push_back(s.next().tokens[0]);
  const PackedBatch e1 = s.next();
  EXPECT_EQ(s.epoch(), 1);
  first1.push_back(e1.tokens[0]);
  for (int64_t r = 1; r < s.rows_in_epoch(); ++r) first1.push_back(s.next().tokens[0]);
  EXPECT_NE(first0, first1);
}

TEST(DatasetPacking, SplitAndValidationBatches) {
  ExampleTable table = synthetic(50, 16);
  ExampleSplit split = split_examples(50, 0.2, 1);
  EXPECT_EQ(split.val.size(), 10u);
  EXPECT_EQ(split.train.size(), 40u);
  std::vector<uint32_t> both = split.train;
  both.insert(both.end(), split.val.begin(), split.val.end());
  std::sort(both.begin(), both.end());
  EXPECT_EQ(both, all_ids(50));
  EXPECT_EQ(split_examples(50, 0.2, 1).val, split.val);
  EXPECT_NE(error_of([&] { split_examples(3, 0.1, 1); }).find("too few for a validation split"), std::string::npos);

  PackedValidation val(table, split.val, 32, 2);
  int64_t examples = 0, batches = 0;
  std::multiset<int32_t> targets;
  std::vector<PackedBatch> first;
  PackedBatch b;
  while (val.next(b)) {
    auto [t, e] = check_batch(b);
    targets.insert(t.begin(), t.end());
    examples += e;
    ++batches;
    first.push_back(b);
  }
  EXPECT_EQ(examples, 10);
  EXPECT_EQ(batches, val.num_batches());
  EXPECT_EQ(targets, trained_tokens(table, split.val));
  val.reset();
  for (const PackedBatch& f : first) {
    ASSERT_TRUE(val.next(b));
    EXPECT_TRUE(same(b, f));
  }
}

// The point of positions and segments: a packed row must give the model exactly the loss of
// its examples run one at a time.
TEST(DatasetPacking, PackedLossEqualsSeparateLosses) {
  Transformer m(testing::tiny_config(), Precision::fp32, LoraConfig{});
  m.init_weights(3);
  testing::randomize(m.base(), 4, 0.3f);
  std::vector<Example> ex;
  for (int e = 0; e < 3; ++e) {
    Example x;
    for (int i = 0; i < 4 + e; ++i) {
      x.tokens.push_back(int32_t((e * 11 + i * 5) % 32));
      x.trained.push_back(uint8_t(i >= 1 + e % 2));
    }
    ex.push_back(x);
  }
  ExampleTable table(ex);
  RowPlan plan = plan_rows(table, all_ids(3), 16);
  ASSERT_EQ(plan.num_rows(), 1);
  PackedBatch b = make_packed_batch(1, 16);
  fill_row(b, 0, table, plan.row(0));
  LossSum packed = m.forward_loss(input_of(b));

  double sum = 0;
  int64_t count = 0;
  for (uint32_t id = 0; id < 3; ++id) {
    PackedBatch one = make_packed_batch(1, table.length(id));
    const uint32_t ids[] = {id};
    fill_row(one, 0, table, ids);
    ModelInput in = input_of(one);
    in.positions = nullptr;  // the defaults for a single example
    in.segments = nullptr;
    LossSum s = m.forward_loss(in);
    sum += s.sum;
    count += s.count;
  }
  EXPECT_EQ(packed.count, count);
  EXPECT_NEAR(packed.sum, sum, 1e-4 * std::max(1.0, std::abs(sum)));
}

}  // namespace
}  // namespace mt
