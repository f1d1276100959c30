// `meshtrain shard` on an expert-parallel mesh (issue 32 item 4): the header's rank formula names
// ep, an expert's blocks lie on the ranks of its ep coordinate only (the listing's grids, the JSON
// blocks and replication), the bytes per rank carry an ep column and equal the trainer's layout,
// and the experts are listed once per pattern with the range each ep rank holds.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "run_command.h"

namespace mt::testing {
namespace {

using nlohmann::json;

TEST(ShardExperts, HeaderFormulaNamesEverySplitAxis) {
  const CommandResult r = run_meshtrain("shard --preset mixtral-8x7b --mesh fsdp=2,ep=4");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("rank = ((dp*2 + fsdp)*4 + ep)*1 + tp"), std::string::npos) << r.output.substr(0, 400);
  const CommandResult pp = run_meshtrain("shard --preset mixtral-8x7b --mesh pp=2,ep=2,cp=2 --set train.seq_len=64");
  ASSERT_EQ(pp.code, 0) << pp.output;
  EXPECT_NE(pp.output.find("rank = ((((pp*1 + dp)*1 + fsdp)*2 + ep)*2 + cp)*1 + tp"), std::string::npos)
      << pp.output.substr(0, 400);
}

TEST(ShardExperts, ExpertsAreListedOncePerPatternWithTheirEpRanges) {
  const CommandResult r = run_meshtrain("shard --preset mixtral-8x7b --mesh fsdp=2,ep=4");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("model.layers.*.block_sparse_moe.experts.*.w1.weight  x 8 experts (ep 0: experts 0-1, "
                          "ep 1: experts 2-3, ep 2: experts 4-5, ep 3: experts 6-7)  x 32 layers"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("experts.7.w1"), std::string::npos);
  EXPECT_NE(r.output.find("ep 2: experts 4-5 on ranks 2,6"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("   ep "), std::string::npos);  // the bytes table's ep column
  // --all lists every expert, each on its own ep coordinate's ranks.
  const CommandResult all = run_meshtrain("shard --preset mixtral-8x7b --mesh ep=8 --set model.num_hidden_layers=1 --all");
  ASSERT_EQ(all.code, 0) << all.output;
  EXPECT_NE(all.output.find("block_sparse_moe.experts.7.w1.weight"), std::string::npos);
}

TEST(ShardExperts, AnExpertsBlocksLieOnItsEpCoordinatesRanks) {
  const CommandResult r =
      run_meshtrain("shard --json --preset mixtral-8x7b --mesh fsdp=2,ep=4 --set model.num_hidden_layers=2");
  ASSERT_EQ(r.code, 0) << r.output;
  const json j = json::parse(r.output);
  EXPECT_EQ(j["mesh"]["ep"], 4);
  EXPECT_EQ(j["expert_parallel"]["shares"][2]["experts"], json({4, 5}));
  EXPECT_EQ(j["expert_parallel"]["shares"][2]["ranks"], json({2, 6}));
  bool seen = false;
  for (const auto& t : j["tensors"]) {
    std::set<int64_t> ranks;
    for (const auto& b : t["blocks"]) ranks.insert(b["rank"].get<int64_t>());
    if (t["name"] == "model.layers.1.block_sparse_moe.experts.5.w2.weight") {
      seen = true;
      EXPECT_EQ(t["ep_owner"], 2);
      EXPECT_EQ(ranks, (std::set<int64_t>{2, 6}));  // rank = fsdp*4 + ep
      EXPECT_EQ(t["replication"], 1);               // split over fsdp, held by no other rank
    }
    if (t["name"] == "model.layers.1.block_sparse_moe.gate.weight") {
      EXPECT_EQ(t.count("ep_owner"), 0u);
      EXPECT_EQ(ranks.size(), 8u);
    }
  }
  EXPECT_TRUE(seen);
  // Every rank holds two experts of each layer: the same bytes on all of them.
  for (const auto& rank : j["ranks"]) {
    EXPECT_EQ(rank["bytes"]["total"], j["ranks"][0]["bytes"]["total"]);
    EXPECT_TRUE(rank["coords"].contains("ep"));
  }
}

TEST(ShardExperts, EpOnADenseModelIsRefusedInOneLine) {
  const CommandResult r = run_meshtrain("shard --preset llama3-8b --mesh ep=2");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("no mixture of experts to split"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace mt::testing
