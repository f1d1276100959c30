// Partition rules, tensor layouts, the shape-only parameter list and the shard command.
#include <gtest/gtest.h>

#include "error_of.h"
#include "run_command.h"

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include "core/error.h"
#include "parallel/layout.h"
#include "parallel/partition.h"
#include "parallel/shard_plan.h"
#include "model/transformer.h"
#include "model/param_shapes.h"
#include "model/presets.h"
#include "model_fixtures.h"

namespace mt::parallel {
namespace {

const std::vector<Axis> kTp = {Axis::tp}, kFsdp = {Axis::fsdp}, kNone = {};

LoraConfig all_targets_lora() {
  LoraConfig l;
  l.enabled = true;
  l.rank = 4;
  l.targets = {"q", "k", "v", "o", "gate", "up", "down", "lm_head"};
  return l;
}

TEST(PartitionRules, DefaultsMatchEveryLlamaTensor) {
  const auto rules = default_llama_rules();
  for (bool lora : {false, true}) {
    LoraConfig l = lora ? all_targets_lora() : LoraConfig{};
    for (const auto& p : llama_param_shapes(llama_preset("llama3-8b"), l))
      EXPECT_NO_THROW(rules.match(p.name)) << p.name;
  }
  const PartitionSpec col{kTp, kFsdp}, row{kFsdp, kTp};
  EXPECT_EQ(rules.match("model.embed_tokens.weight").spec, col);
  for (const char* n : {"q", "k", "v"})
    EXPECT_EQ(rules.match(std::string("model.layers.3.self_attn.") + n + "_proj.weight").spec, col);
  EXPECT_EQ(rules.match("model.layers.3.mlp.gate_proj.weight").spec, col);
  EXPECT_EQ(rules.match("model.layers.3.mlp.up_proj.weight").spec, col);
  EXPECT_EQ(rules.match("model.layers.3.self_attn.o_proj.weight").spec, row);
  EXPECT_EQ(rules.match("model.layers.3.mlp.down_proj.weight").spec, row);
  EXPECT_EQ(rules.match("model.layers.3.input_layernorm.weight").spec, PartitionSpec{});
  EXPECT_EQ(rules.match("model.norm.weight").spec, PartitionSpec{});
  EXPECT_EQ(rules.match("lm_head.weight").spec, col);
  // Adapters follow their base layer's tensor-parallel split; fsdp takes the large dimension.
  const PartitionSpec whole_fsdp{kNone, {Axis::fsdp}}, rows_tp_fsdp{{Axis::tp, Axis::fsdp}};
  EXPECT_EQ(rules.match("model.layers.0.self_attn.q_proj.lora_A.weight").spec, whole_fsdp);
  EXPECT_EQ(rules.match("model.layers.0.self_attn.q_proj.lora_B.weight").spec, rows_tp_fsdp);
  EXPECT_EQ(rules.match("lm_head.lora_A.weight").spec, whole_fsdp);
  EXPECT_EQ(rules.match("lm_head.lora_B.weight").spec, rows_tp_fsdp);
  EXPECT_EQ(rules.match("model.layers.0.mlp.down_proj.lora_A.weight").spec,
            (PartitionSpec{kNone, {Axis::tp, Axis::fsdp}}));
  EXPECT_EQ(rules.match("model.layers.0.self_attn.o_proj.lora_B.weight").spec,
            (PartitionSpec{{Axis::fsdp}}));
  EXPECT_EQ(col.str(), "(tp, fsdp)");
}

TEST(PartitionRules, UnmatchedNameIsAnError) {
  EXPECT_NE(error_of([] { default_llama_rules().match("model.layers.0.mystery.weight"); })
                .find("no partition rule matches 'model.layers.0.mystery.weight'"),
            std::string::npos);
  EXPECT_NE(error_of([] { PartitionRules{}.match("lm_head.weight"); }).find("no partition rule"),
            std::string::npos);
}

TEST(PartitionRules, UserRuleFromTomlOverridesDefaultFirstMatchWins) {
  auto cfg = parse_partition_toml(R"(
[[partition.rules]]
pattern = 'mlp\.down_proj\.weight$'
spec = [["fsdp", "tp"], "none"]
[[partition.rules]]
pattern = 'down_proj'
spec = ["tp"]
)", "rules.toml");
  auto rules = cfg.effective();
  EXPECT_EQ(rules.match("model.layers.1.mlp.down_proj.weight").spec,
            (PartitionSpec{{Axis::fsdp, Axis::tp}, kNone}));
  EXPECT_EQ(rules.match("model.layers.1.mlp.down_proj.weight").spec.str(), "((fsdp, tp), None)");
  EXPECT_EQ(rules.match("model.layers.1.mlp.down_proj.lora_B.weight").spec, (PartitionSpec{kTp}));
  // Defaults still apply behind the user's rules...
  EXPECT_EQ(rules.match("model.norm.weight").spec, PartitionSpec{});
  // ...unless replaced.
  auto only = parse_partition_toml("[partition]\nreplace_defaults = true\n[[partition.rules]]\n"
                                   "pattern = 'x'\nspec = []\n", "r.toml");
  EXPECT_THROW(only.effective().match("model.norm.weight"), Error);
}

TEST(PartitionRules, TomlErrorsAreClear) {
  auto err = [](const std::string& text) {
    return error_of([&] { parse_partition_toml(text, "r.toml"); });
  };
  EXPECT_NE(err("[[partition.rules]]\npattern='a'\nspec=['mp']\n").find("unknown mesh axis 'mp'"), std::string::npos);
  EXPECT_NE(err("[[partition.rules]]\npattern='a'\nspec=['pp']\n").find("pp cannot split"), std::string::npos);
  EXPECT_NE(err("[[partition.rules]]\npattern='a'\nspec=['tp','tp']\n").find("used twice"), std::string::npos);
  EXPECT_NE(err("[[partition.rules]]\npattern='('\nspec=[]\n").find("bad regular expression"), std::string::npos);
  EXPECT_NE(err("[[partition.rules]]\npattern='a'\nspek=[]\n").find("unknown key 'spek'"), std::string::npos);
  EXPECT_NE(err("[[partition.rules]]\npattern='a'\n").find("spec"), std::string::npos);
  EXPECT_NE(err("[partition]\nrulez=1\n").find("partition.rulez"), std::string::npos);
  EXPECT_NE(err("[partition\n").find("r.toml:1"), std::string::npos);
}

TEST(PartitionLayout, QProjOnFsdp2Tp2) {
  // q_proj [out=256, in=128] with (tp, fsdp): rows by tp, columns by fsdp; rank = fsdp*2 + tp.
  auto t = make_layout("q", {256, 128}, PartitionSpec{kTp, kFsdp}, MeshShape::parse("fsdp=2,tp=2"));
  EXPECT_EQ(t.local_shape, (std::vector<int64_t>{128, 64}));
  const std::array<std::array<Range, 2>, 4> want = {{
      {Range{0, 128}, Range{0, 64}},     // rank 0: tp 0, fsdp 0
      {Range{128, 256}, Range{0, 64}},   // rank 1: tp 1, fsdp 0
      {Range{0, 128}, Range{64, 128}},   // rank 2: tp 0, fsdp 1
      {Range{128, 256}, Range{64, 128}}  // rank 3: tp 1, fsdp 1
  }};
  for (int64_t r = 0; r < 4; ++r) {
    EXPECT_EQ(t.range(r, 0), want[size_t(r)][0]) << r;
    EXPECT_EQ(t.range(r, 1), want[size_t(r)][1]) << r;
  }
  EXPECT_EQ(t.replication(), 1);
  // Two axes on one dim: fsdp major, tp minor.
  auto m = make_layout("e", {8, 4}, PartitionSpec{{Axis::fsdp, Axis::tp}}, MeshShape::parse("fsdp=2,tp=2"));
  EXPECT_EQ(m.range(1, 0), (Range{2, 4}));  // fsdp 0, tp 1 -> block 1
  EXPECT_EQ(m.range(2, 0), (Range{4, 6}));  // fsdp 1, tp 0 -> block 2
  EXPECT_EQ(m.range(3, 1), (Range{0, 4}));
}

TEST(PartitionLayout, FsdpSplitsAreOverFsdpAndCpUnderContextParallelism) {
  // Issue 31 item 3 (torchtitan's dp_shard x cp): a rule's fsdp is fsdp x cp, cp right after fsdp,
  // so rank (f, c) holds block f * cp + c, its position in Mesh::shard_group().
  const MeshShape mesh = MeshShape::parse("fsdp=2,cp=2,tp=2");
  auto t = make_layout("q", {256, 128}, PartitionSpec{kTp, kFsdp}, mesh);
  EXPECT_EQ(t.spec, (PartitionSpec{kTp, {Axis::fsdp, Axis::cp}}));
  EXPECT_EQ(t.local_shape, (std::vector<int64_t>{128, 32}));
  EXPECT_EQ(t.replication(), 1);
  for (int64_t r = 0; r < mesh.world(); ++r) {
    const Coords c = coords_of(mesh, r);
    const int64_t block = c[size_t(Axis::fsdp)] * 2 + c[size_t(Axis::cp)];
    EXPECT_EQ(t.range(r, 1), (Range{block * 32, (block + 1) * 32})) << r;
    EXPECT_EQ(t.range(r, 0), (Range{c[size_t(Axis::tp)] * 128, (c[size_t(Axis::tp)] + 1) * 128})) << r;
  }
  // cp alone shards too; what no rule splits stays on every rank; without cp the spec is the rule's.
  EXPECT_EQ(make_layout("w", {8, 4}, PartitionSpec{kFsdp}, MeshShape::parse("cp=4")).local_shape,
            (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(make_layout("n", {8}, PartitionSpec{}, MeshShape::parse("cp=4")).replication(), 4);
  EXPECT_EQ(shard_spec(PartitionSpec{kTp, kFsdp}, MeshShape::parse("fsdp=2,tp=2")), (PartitionSpec{kTp, kFsdp}));
  EXPECT_EQ(error_of([] { make_layout("w", {6, 4}, PartitionSpec{kFsdp}, MeshShape::parse("fsdp=2,cp=2")); }),
            "w dim 0 (6) is not divisible by fsdp=2 x cp=2 (4); change the mesh or add a partition rule for it");
}

TEST(PartitionLayout, BlocksTileTheTensorOncePerReplicaGroup) {
  const std::vector<std::pair<std::string, PartitionSpec>> cases = {
      {"dp=2,fsdp=2,tp=2", PartitionSpec{kTp, kFsdp}},
      {"dp=2,fsdp=2,tp=2", PartitionSpec{kFsdp, kTp}},
      {"dp=2,fsdp=2,tp=2", PartitionSpec{}},
      {"dp=2,fsdp=2,tp=2", PartitionSpec{{Axis::fsdp, Axis::tp}, kNone}},
      {"fsdp=3,tp=2", PartitionSpec{kNone, {Axis::tp, Axis::fsdp}}},
      {"dp=3", PartitionSpec{kNone, {Axis::dp}}},
      {"fsdp=2,cp=2,tp=3", PartitionSpec{kTp, kFsdp}},
      {"dp=2,cp=3", PartitionSpec{kFsdp, kNone}},
  };
  for (const auto& [mesh_text, spec] : cases) {
    const MeshShape mesh = MeshShape::parse(mesh_text);
    const int64_t R = 12, C = 24;
    auto t = make_layout("w", {R, C}, spec, mesh);
    std::vector<int> cover(size_t(R * C), 0);
    for (int64_t r = 0; r < mesh.world(); ++r) {
      auto rows = t.range(r, 0), cols = t.range(r, 1);
      EXPECT_EQ(rows.size() * cols.size(), t.local_numel());
      for (int64_t i = rows.begin; i < rows.end; ++i)
        for (int64_t j = cols.begin; j < cols.end; ++j) ++cover[size_t(i * C + j)];
    }
    // Every element is held once per replica, and replica groups have equal sizes.
    for (int c : cover) ASSERT_EQ(c, t.replication()) << mesh_text << " " << spec.str();
    for (int64_t r = 0; r < mesh.world(); ++r)
      EXPECT_EQ(int64_t(t.replicas(r).size()), t.replication());
  }
}

TEST(PartitionLayout, DivisibilityErrorNamesTensorDimSizeAndAxes) {
  const MeshShape tp3 = MeshShape::parse("tp=3");
  EXPECT_EQ(error_of([&] { make_layout("model.embed_tokens.weight", {32000, 4096}, PartitionSpec{kTp, kFsdp}, tp3); }),
            "model.embed_tokens.weight dim 0 (32000) is not divisible by tp=3; change the mesh or "
            "add a partition rule for it");
  EXPECT_NE(error_of([] {
              make_layout("w", {10, 4}, PartitionSpec{{Axis::fsdp, Axis::tp}},
                          MeshShape::parse("fsdp=2,tp=3"));
            }).find("w dim 0 (10) is not divisible by fsdp=2 x tp=3 (6)"),
            std::string::npos);
  EXPECT_NE(error_of([] { make_layout("n", {8}, PartitionSpec{kTp, kFsdp}, MeshShape{}); })
                .find("has 2 dimensions but the tensor has 1"),
            std::string::npos);
}

TEST(ShardParamShapes, MatchARealModelExactly) {
  for (bool tied : {false, true})
    for (bool lora : {false, true}) {
      ModelConfig c = mt::testing::tiny_config(tied);
      LoraConfig l = lora ? all_targets_lora() : LoraConfig{};
      Transformer model(c, Precision::fp32, l);
      std::vector<std::pair<std::string, std::vector<int64_t>>> real, shapes;
      for (const auto& p : model.base().params()) real.emplace_back(p.name, p.shape);
      for (const auto& p : model.adapters().params()) real.emplace_back(p.name, p.shape);
      for (const auto& p : llama_param_shapes(c, l)) shapes.emplace_back(p.name, p.shape);
      EXPECT_EQ(shapes, real) << "tied " << tied << " lora " << lora;
    }
}

TEST(ShardPlan, LlamaPresetsLayOutAndLoraSizeMatchesTheSeed) {
  LoraConfig l = all_targets_lora();
  l.rank = 8;
  auto params = shard_params(llama_param_shapes(llama_preset("llama3-405b"), l), true,
                             default_llama_rules(), MeshShape::parse("fsdp=8"));
  auto one = unsharded_bytes(params);
  EXPECT_NEAR(double(one.trainable_elements), 313e6, 1e6);  // the seed's "about 313M"
  EXPECT_NEAR(double(one.elements - one.trainable_elements), 405.85e9, 0.1e9);
}

struct CmdResult {
  int code;
  std::string out;
};

CmdResult run_binary(const std::string& args) {
  auto r = mt::testing::run_meshtrain(args);
  return {r.code, r.output};
}

const char* kTinySet =
    "--set model.hidden_size=64 --set model.intermediate_size=128 --set model.num_hidden_layers=2 "
    "--set model.num_attention_heads=4 --set model.num_key_value_heads=2 --set model.vocab_size=96";

TEST(ShardCommand, TextShowsBoxGridAndBytesPerRank) {
  CmdResult r = run_binary(std::string("shard --mesh fsdp=2,tp=2 ") + kTinySet);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("mesh fsdp=2,tp=2 (4 ranks"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("model.layers.*.self_attn.q_proj.weight  x 2 layers"), std::string::npos);
  // q_proj (tp, fsdp): tp splits rows, fsdp columns; rank = fsdp*2 + tp.
  EXPECT_NE(r.out.find("┌───┬───┐\n  │ 0 │ 2 │\n  ├───┼───┤\n  │ 1 │ 3 │\n  └───┴───┘"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("│ 0-3 │"), std::string::npos);  // norms on every rank
  EXPECT_NE(r.out.find("bytes per rank"), std::string::npos);
  EXPECT_NE(r.out.find("18 B"), std::string::npos);  // the stated assumption
  CmdResult all = run_binary(std::string("shard --all --mesh fsdp=2,tp=2 ") + kTinySet);
  EXPECT_NE(all.out.find("model.layers.1.self_attn.q_proj.weight\n"), std::string::npos);
}

TEST(ShardCommand, JsonBytesPerRankSumToTheExpectedTotal) {
  CmdResult r = run_binary(std::string("shard --json --mesh fsdp=2,tp=2 ") + kTinySet);
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  // Expected by hand: matrices split 4 ways once, norms replicated on all 4 ranks; 18 B each.
  const int64_t C = 64, I = 128, V = 96, kv = 32, L = 2;
  const int64_t matrices = 2 * V * C + L * (2 * C * C + 2 * kv * C + 3 * I * C);
  const int64_t norms = (2 * L + 1) * C;
  int64_t sum = 0;
  for (const auto& rank : j["ranks"]) sum += rank["bytes"]["total"].get<int64_t>();
  EXPECT_EQ(sum, 18 * (matrices + 4 * norms));
  EXPECT_EQ(j["total_bytes"].get<int64_t>(), sum);
  EXPECT_EQ(j["unsharded_bytes"].get<int64_t>(), 18 * (matrices + norms));
  EXPECT_EQ(j["ranks"].size(), 4u);
  // LoRA: the base is bf16 only, adapters carry the 18 bytes.
  CmdResult lr = run_binary(std::string("shard --json --mesh fsdp=2 --set lora.enabled=true --set lora.rank=2 ") + kTinySet);
  ASSERT_EQ(lr.code, 0) << lr.out;
  auto lj = nlohmann::json::parse(lr.out);
  const int64_t adapters = L * 2 * (2 * (C + C) + 2 * (C + kv) + 2 * (C + I) + (I + C));
  EXPECT_EQ(lj["unsharded_bytes"].get<int64_t>(), 2 * (matrices + norms) + 18 * adapters);
}

TEST(ShardCommand, BadInputGivesOneClearLine) {
  // train's refusal, as train words it (train/run_layout.h).
  CmdResult r = run_binary(std::string("shard --mesh tp=3 ") + kTinySet);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("tensor parallelism: model.num_attention_heads (4) is not divisible by tp=3"), std::string::npos) << r.out;
  r = run_binary("shard --mesh dp=2,mp=2");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("unknown mesh axis 'mp'"), std::string::npos) << r.out;
  r = run_binary("shard");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--mesh"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace mt::parallel
