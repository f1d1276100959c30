// The planner's models against hand-computed values: memory items of a tiny LLaMA (and parameter
// bytes equal to shard_plan's, the trainer's own count), the 405B seed's sizes, FLOP formulas,
// ring collectives, the pipeline bubble, the search and bad input.
#include <gtest/gtest.h>

#include "core/error.h"
#include "parallel/shard_plan.h"
#include "plan/collectives.h"
#include "plan/search.h"

namespace mt::plan {
namespace {

ModelShape tiny() {
  ModelConfig c;
  c.hidden_size = 64, c.intermediate_size = 128, c.num_hidden_layers = 2;
  c.num_attention_heads = 4, c.num_key_value_heads = 2, c.vocab_size = 256;
  c.max_position_embeddings = 64, c.tie_word_embeddings = false;
  return {"tiny", c};
}

PlanInput tiny_input(const parallel::MeshShape& mesh) {
  PlanInput in;
  in.model = tiny();
  in.cluster = cluster_preset("cpu");
  in.seq = 16, in.micro_batch = 1, in.global_batch = mesh.dp * mesh.fsdp * 2;
  in.mesh = mesh;
  return in;
}

TEST(PlanMemory, TinyParameterStateByHand) {
  PlanInput in = tiny_input({1, 2, 2, 1});  // fsdp 2, tp 2
  const MemoryBreakdown m = peak_memory(in);
  // Per rank: embedding and head 256x64/4 = 4096 each; per layer q 1024, k 512, v 512, o 1024,
  // gate/up/down 2048 each, norms 2x64 whole = 9344; final norm 64.  4096*2 + 2*9344 + 64 = 26944.
  const double local = 26944;
  EXPECT_EQ(m.item("weights"), 2 * local);
  EXPECT_EQ(m.item("grads"), 4 * local);
  EXPECT_EQ(m.item("master"), 4 * local);
  EXPECT_EQ(m.item("optimizer"), 8 * local);
}

TEST(PlanMemory, ParameterBytesEqualShardPlan) {
  for (auto mesh : {parallel::MeshShape{1, 2, 2, 1}, parallel::MeshShape{2, 1, 2, 1}, parallel::MeshShape{1, 4, 1, 1}})
    for (bool lora : {false, true}) {
      PlanInput in = tiny_input(mesh);
      in.lora.enabled = lora;
      in.lora.targets = {"q", "v", "down", "lm_head"};
      const auto sharded = parallel::shard_params(llama_param_shapes(in.model.config, in.lora), lora,
                                              parallel::default_llama_rules(), mesh);
      const auto ranks = parallel::bytes_per_rank(sharded, mesh);
      const MemoryBreakdown m = peak_memory(in);
      const double state = m.item("weights") + m.item("grads") + m.item("master") + m.item("optimizer") +
                           m.item("lora params") + m.item("lora grads+optimizer");
      for (const auto& r : ranks) EXPECT_EQ(state, double(r.total())) << mesh.str() << " lora " << lora;
    }
}

// Under pp each stage's parameter state is what `meshtrain shard` counts on that stage's ranks:
// the trainer's split (pipeline_blocks), its units (stage_units) and the tied embedding's copy on
// the last stage.
TEST(PlanMemory, StageParameterBytesEqualShardPlan) {
  for (auto mesh : {parallel::MeshShape{1, 1, 1, 2}, parallel::MeshShape{1, 1, 2, 2}, parallel::MeshShape{1, 2, 1, 2},
                    parallel::MeshShape{1, 1, 1, 4}})
    for (const std::string blocks : {"", "3,1"})
      for (bool tied : {false, true})
        for (bool lora : {false, true}) {
          if (mesh.pp == 4 && !blocks.empty()) continue;
          PlanInput in = tiny_input(mesh);
          in.model.config.num_hidden_layers = 4;
          in.model.config.tie_word_embeddings = tied;
          in.pp_blocks = blocks;
          in.lora.enabled = lora;
          in.lora.targets = {"q", "v", "down", "lm_head"};
          const parallel::StageSplit placement{in.model.config, parallel::pipeline_blocks(in.model.config, mesh.pp, blocks)};
          const auto sharded = parallel::shard_params(llama_param_shapes(in.model.config, in.lora), lora,
                                                      parallel::default_llama_rules(), mesh);
          const auto ranks = parallel::bytes_per_rank(sharded, mesh, placement);
          const auto stages = stage_params(in);
          ASSERT_EQ(int64_t(stages.size()), mesh.pp);
          for (const auto& r : ranks) {
            const int64_t stage = parallel::coords_of(mesh, r.rank)[size_t(parallel::Axis::pp)];
            const MemoryBreakdown m = memory_per_device(in, stages[size_t(stage)]);
            const double state = m.item("weights") + m.item("grads") + m.item("master") + m.item("optimizer") +
                                 m.item("lora params") + m.item("lora grads+optimizer");
            EXPECT_EQ(state, double(r.total()))
                << mesh.str() << " blocks '" << blocks << "' tied " << tied << " lora " << lora << " rank " << r.rank;
          }
        }
}

// A stage of this engine (every family) holds one micro-batch's activations in the whole model's
// arena, whatever the schedule, and the pipeline's buffers of N x C each in the compute dtype (bf16
// here) as its schedule keeps them (parallel::pipeline_buffers): GPipe's last stage's grow with m,
// 1F1B's stay at pp - stage in flight.
TEST(PlanMemory, PipelineStageHoldsOneMicroBatchAndTheSchedulesBuffers) {
  PlanInput in = tiny_input({1, 1, 1, 2});
  in.global_batch = 8;  // m = 8
  const auto stages = stage_params(in);
  const double buffer = 2.0 * 16 * 64;    // bf16, N = 16 tokens x C = 64
  const double residual = 4.0 * 16 * 64;  // the arena's f32 residual stream of the same
  for (auto schedule : {parallel::PipelineSchedule::one_f_one_b, parallel::PipelineSchedule::gpipe})
    for (int s = 0; s < 2; ++s) {
      in.pp_schedule = schedule;
      const MemoryBreakdown m = memory_per_device(in, stages[size_t(s)]);
      // One micro-batch through the stage's own block (of the two), the head's rows on the last.
      const ActivationBytes own = activation_bytes(in, 1, s == 0, s == 1);
      EXPECT_EQ(m.item("activations"), own.per_micro_batch + own.shared);
      EXPECT_EQ(m.item("logits+loss"), s == 1 ? own.logits : 0.0);
      EXPECT_EQ(m.item("pipeline buffers"),
                double(parallel::pipeline_buffers(schedule, 2, s, 8).peak_allocated) * buffer);
    }
  // pp = 2, m = 8: GPipe's stage 0 frees each output when its next forward finds the send
  // complete, so it keeps its last output and the received gradient; stage 1 8 gradients and an
  // input; 1F1B's stage 1 3.
  in.pp_schedule = parallel::PipelineSchedule::gpipe;
  EXPECT_EQ(memory_per_device(in, stages[0]).item("pipeline buffers"), 2 * buffer);
  EXPECT_EQ(memory_per_device(in, stages[1]).item("pipeline buffers"), 9 * buffer);
  in.pp_schedule = parallel::PipelineSchedule::one_f_one_b;
  EXPECT_EQ(memory_per_device(in, stages[1]).item("pipeline buffers"), 3 * buffer);
  // A stage's activations are its own units', not the whole model's: one block's set (N x 1688
  // bytes at tp 1: 2 * (2C + 2C + 2kv + 3I) + 4 * (2 + C + H)) and one residual stream fewer than
  // both blocks', and the first stage has no head rows (final norm output, its rstd, the losses).
  const double block = 16.0 * (2 * (128 + 128 + 64 + 384) + 4 * (2 + 64 + 4));
  const ActivationBytes whole = activation_bytes(in, 2, true, true), first = activation_bytes(in, 1, true, false);
  EXPECT_EQ(whole.per_micro_batch - first.per_micro_batch, block + residual + 4.0 * 2 * 16 + 2.0 * 16 * 64);
  EXPECT_EQ(memory_per_device(in, stages[0]).item("logits+loss"), 0.0);
  // The Frontier study's GPT shapes are priced as this engine runs them, like every family: a
  // stage holds one micro-batch's activations under either schedule (not Megatron's in-flight
  // sets), beside the pipeline's own buffers.
  in.model = model_preset("gpt-22b");
  in.seq = 2048;
  const auto gpt = stage_params(in);
  const ActivationBytes a = activation_bytes(in, gpt[0].chunk_layers, true, false);
  const double gpt_buffer = 2.0 * 2048 * 6144;  // bf16
  for (auto schedule : {parallel::PipelineSchedule::one_f_one_b, parallel::PipelineSchedule::gpipe}) {
    in.pp_schedule = schedule;
    EXPECT_EQ(memory_per_device(in, gpt[0]).item("activations"), a.per_micro_batch + a.shared);
    EXPECT_EQ(memory_per_device(in, gpt[0]).item("pipeline buffers"),
              double(parallel::pipeline_buffers(schedule, 2, 0, 8, 1).peak_allocated) * gpt_buffer);
  }
}

// A GPT block's saved activations by hand (GPT-175B, tp 4, one row of 2048 tokens, bf16): per
// token 2 bytes for n1, n2 (C each, whole), q, k, v, the attention output (C each) and up, h (4C
// each) split over tp: 2C + (4C + 8C)/4 = 61440 elements; 4 bytes for the LayerNorms' rstd and
// mean (2 each), x2 (C) and the log-sum-exp of the rank's 24 heads: 12316. A LLaMA block would
// have three MLP outputs and no means.
TEST(PlanMemory, GptBlockActivationsByHand) {
  PlanInput in;
  in.model = model_preset("gpt-175b");
  in.cluster = cluster_preset("frontier");
  in.seq = 2048, in.micro_batch = 1, in.global_batch = 1;
  in.mesh = {1, 1, 4, 1};
  in.sequence_parallel = false;
  EXPECT_EQ(activation_bytes(in, 1, false, false).layer, 2048.0 * (2 * 61440 + 4 * 12316));
  // The head's rows: the final LayerNorm's bf16 output, its f32 rstd and mean, the f32 losses.
  EXPECT_EQ(activation_bytes(in, 1, false, true).per_micro_batch - activation_bytes(in, 1, false, false).per_micro_batch,
            2048.0 * (2 * 12288 + 4 * 3));
  // Megatron's sequence parallelism: n1 and n2 (2C), the norms' rstd and mean (4) and x2 (C) are
  // split over tp too, the head's final norm statistics (its output is gathered whole).
  in.sequence_parallel = true;
  EXPECT_EQ(activation_bytes(in, 1, false, false).layer,
            2048.0 * (2 * (2 * 12288 / 4 + 12 * 12288 / 4) + 4 * ((4 + 12288) / 4 + 24)));
  EXPECT_EQ(activation_bytes(in, 1, false, true).per_micro_batch - activation_bytes(in, 1, false, false).per_micro_batch,
            2048.0 * (2 * 12288 + 4 * (1 + 2.0 / 4)));
}

// Interleaved 1F1B (pp_virtual chunks per stage): blocks per chunk, each stage holding its chunks,
// the bubble (p - 1) / (v m + p - 1), and the in-flight peak counted from the order.
TEST(PlanTime, InterleavedPipeline) {
  PlanInput in = tiny_input({1, 1, 1, 2});
  in.model.config.num_hidden_layers = 4;
  in.global_batch = 4;  // m = 4
  in.pp_virtual = 2;
  EXPECT_EQ(stage_blocks(in), (std::vector<int64_t>{1, 1, 1, 1}));
  const auto stages = stage_params(in);
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_EQ(stages[0].layers, 2);
  EXPECT_TRUE(stages[0].first && !stages[0].last);
  EXPECT_TRUE(stages[1].last && !stages[1].first);
  EXPECT_DOUBLE_EQ(step_time(in).bubble_fraction, 1.0 / (2 * 4 + 1));
  EXPECT_EQ(memory_per_device(in, stages[0]).item("pipeline buffers"),
            double(parallel::pipeline_buffers(in.pp_schedule, 2, 0, 4, 2).peak_allocated) * 2.0 * 16 * 64);
  in.global_batch = 3;
  EXPECT_THROW(validate(in), Error);  // m not a multiple of pp
}

TEST(PlanMemory, TinyActivationsByHand) {
  PlanInput in = tiny_input({1, 2, 2, 1});
  in.sequence_parallel = false;  // tp alone first; with it below
  // N = 16 tokens, tp 2. Per token per layer: bf16 2C + (2C + 2kv + 3I)/tp = 128 + 288 = 416,
  // f32 2 + C + H/tp = 68: block = 16 * (2*416 + 4*68) = 17664. Residual f32 4*N*C*(L+2) (each
  // block's input, the output, the gradient) + 8N, final norm bf16 2*N*C: 16384 + 128 + 2048 =
  // 18560. Scratch at tp-local widths, as the rank's model has them (parallel::tensor_parallel_config:
  // 2 of the 4 heads, q 32; I 64, kv 16): 2 * 16 * (3*64 + 64 + 32 + 4*16 + 1) = 11296.
  const MemoryBreakdown m = peak_memory(in);
  EXPECT_EQ(m.item("activations"), 18560 + 2 * 17664 + 11296);
  // Checkpointing keeps the residual stream and one block, and the recompute's output (4*N*C).
  in.checkpointing = true;
  EXPECT_EQ(peak_memory(in).item("activations"), 18560 + 4096 + 17664 + 11296);
  // Sequence parallelism splits the residual stream's rows over tp: per token per layer bf16
  // 2C/2 + 288 = 352, f32 (2 + C)/2 + H/tp = 35: block = 16 * (2*352 + 4*35) = 13504. Residual
  // 4*N*C*(L+2)/2 + 4N(1 + 1/2) (the losses whole, the final norm's rstd split) + the final norm's
  // output whole 2*N*C + the embedding's rows whole in f32 4*N*C: 8192 + 96 + 2048 + 4096 = 14432.
  // Scratch + one gathered [N, C] region: 11296 + 2*16*64 = 13344.
  in.sequence_parallel = true, in.checkpointing = false;
  EXPECT_EQ(peak_memory(in).item("activations"), 14432 + 2 * 13504 + 13344);
  // Checkpointing: one more residual stream of N/tp rows (2048) and one block.
  in.checkpointing = true;
  EXPECT_EQ(peak_memory(in).item("activations"), 14432 + 2048 + 13504 + 13344);
  in.sequence_parallel = false, in.checkpointing = true;
  // Logits: one chunk of min(2^25 / V, N) = 16 rows of V/tp + 2 columns in bf16.
  EXPECT_EQ(m.item("logits+loss"), 16 * (128 + 2) * 2);
}

// The engine builds f32 cos and sin tables for every position on every rank (model/transformer.cpp),
// for learned positions too (GPT-2's: unused there), and a second pair for Gemma 3's local layers.
TEST(PlanMemory, RopeTablesOfEveryPosition) {
  const PlanInput in = tiny_input({1, 1, 2, 1});
  EXPECT_EQ(peak_memory(in).item("rope tables"), 2 * 4 * 64 * (16 / 2));  // 64 positions, head_dim 16
  PlanInput other = tiny_input({1, 1, 1, 1});
  other.model = model_preset("gpt2");  // 1024 positions, head_dim 64
  EXPECT_EQ(peak_memory(other).item("rope tables"), 2 * 4 * 1024 * (64 / 2));
  other.model = model_preset("gemma3-1b");  // 32768 positions, head_dim 256, global and local
  EXPECT_EQ(peak_memory(other).item("rope tables"), 2 * 2 * 4 * 32768 * (256 / 2));
}

TEST(PlanMemory, ZeroShardsOptimizerOverDp) {
  PlanInput in = tiny_input({2, 1, 1, 1});
  const double full = peak_memory(in).item("optimizer");
  in.zero = 1;
  EXPECT_DOUBLE_EQ(peak_memory(in).item("optimizer"), full / 2);
  EXPECT_DOUBLE_EQ(peak_memory(in).item("grads"), peak_memory(tiny_input({2, 1, 1, 1})).item("grads"));
}

TEST(PlanSeed405B, WeightsAndLoraSizes) {
  const ModelShape m = model_preset("llama3-405b");
  LoraConfig lora;
  lora.enabled = true;
  lora.rank = 8;
  lora.targets = {"q", "k", "v", "o", "gate", "up", "down", "lm_head"};
  const ModelParts parts = model_parts(m, lora);
  const double base = double(total_params(parts, m.layers(), false));
  EXPECT_NEAR(2.0 * base / 1e9, 811.7, 1.0);  // bf16 weights: ~810 GB
  // Rank 8 on q, k, v, o, gate, up, down per layer: 8 * ((16384+16384)*2 + (16384+1024)*2 +
  // (16384+53248)*3) = 2473984, times 126 layers, plus lm_head 8 * (16384 + 128256).
  const int64_t lora_params = total_params(parts, m.layers(), true);
  EXPECT_EQ(lora_params, int64_t(2473984) * 126 + 8 * (16384 + 128256));
  EXPECT_NEAR(double(lora_params) / 1e6, 313.0, 0.5);  // the seed's "about 313M"

  PlanInput in;
  in.model = m, in.lora = lora, in.cluster = cluster_preset("mi300x-node");
  in.seq = 64, in.global_batch = 16, in.micro_batch = 2, in.mesh = {1, 8, 1, 1};
  const MemoryBreakdown mem = peak_memory(in);
  EXPECT_NEAR(mem.item("weights") / 1e9, 811.7 / 8, 0.5);
  EXPECT_TRUE(mem.fits());
  // Under the seed's "77%" (JAX's preallocation, not use). 146.7 GB since the planner replays the
  // sharded model's pool (plan/gather_pool.h): the head's unit, with its lm_head adapters a little
  // larger than the embedding's, fits in none of the embedding's blocks, so the layers' blocks
  // serve it and one more is made (4 of 6.4 GB, 2 of 4.2 GB); 132 GB before.
  EXPECT_LT(mem.total, 0.77 * 192e9);
}

// QLoRA: the layers' matrices in NF4 (4 + 8/64 + 64/(64*256) bits each), the rest bf16.
TEST(PlanMemory, TinyNf4BaseByHand) {
  PlanInput in = tiny_input({1, 1, 1, 1});
  in.lora.enabled = true;
  in.base_dtype = BaseDtype::nf4;
  const MemoryBreakdown m = peak_memory(in);
  // Layer matrices: q 4096, k 2048, v 2048, o 4096, gate/up/down 8192 each = 36864 per layer, 73728
  // in all, at 4.12890625 / 8 bytes = 38052; embedding and head 16384 each and norms 2*2*64 + 64
  // in bf16: 2 * 33088 = 66176.
  EXPECT_EQ(kNf4BytesPerWeight, 4.12890625 / 8);
  EXPECT_EQ(m.item("weights"), 38052.0 + 66176.0);
  EXPECT_EQ(m.item("nf4 dequant scratch"), 2.0 * 36864);  // one layer in bf16
  EXPECT_EQ(base_weight_bytes(in), 38052.0 + 66176.0);
  in.base_dtype = BaseDtype::bf16;
  EXPECT_EQ(peak_memory(in).item("weights"), 2.0 * (73728 + 33088));
  EXPECT_EQ(peak_memory(in).item("nf4 dequant scratch"), 0.0);

  in.lora.enabled = false;  // a base that trains cannot be 4-bit
  in.base_dtype = BaseDtype::nf4;
  EXPECT_THROW(validate(in), Error);
}

PlanInput qlora_405b(const std::string& cluster, const parallel::MeshShape& mesh, BaseDtype base) {
  PlanInput in;
  in.model = model_preset("llama3-405b");
  in.lora.enabled = true;  // rank 8 on q, k, v, o, gate, up, down
  in.base_dtype = base;
  in.cluster = cluster_preset(cluster);
  in.seq = 1024, in.global_batch = 8, in.micro_batch = 1, in.checkpointing = true;
  in.mesh = mesh;
  return in;
}

// The issue's figure: 405B QLoRA weights near 216 GB. Per layer the matrices are q and o
// 16384^2, k and v 1024 x 16384, gate, up and down 53248 x 16384 = 3187671040; 126 layers =
// 401646551040 weights in NF4 = 207295119360 bytes; embedding and head 2 x 128256 x 16384 and the
// norms 126 x 2 x 16384 + 16384 = 4206837760 in bf16 = 8413675520 bytes. 215708794880 in all.
TEST(PlanSeed405B, QloraWeightsNear216GB) {
  const PlanInput nf4 = qlora_405b("mi300x-node", {1, 2, 1, 1}, BaseDtype::nf4);
  EXPECT_NEAR(base_weight_bytes(nf4), 215708794880.0, 1.0);
  const PlanInput bf16 = qlora_405b("mi300x-node", {1, 2, 1, 1}, BaseDtype::bf16);
  EXPECT_NEAR(base_weight_bytes(bf16), 2.0 * 405853388800.0, 1.0);
  EXPECT_NEAR(base_weight_bytes(bf16) / base_weight_bytes(nf4), 3.76, 0.01);  // 3.88 on the layers
}

// Which small layouts hold 405B QLoRA, batch 8 x seq 1024 with checkpointing: fsdp over
// 2 x MI300X (192 GB), tp over 4 x H100-80GB; the bf16 base (811 GB) fits on neither.
TEST(PlanSeed405B, QloraFitsTwoMi300xAndFourH100) {
  const std::vector<std::pair<std::string, parallel::MeshShape>> layouts = {{"mi300x-node", {1, 2, 1, 1}},
                                                                             {"dgx-h100", {1, 1, 4, 1}}};
  for (const auto& [cluster, mesh] : layouts) {
    SCOPED_TRACE(cluster);
    const int64_t devices = mesh.world();
    const MemoryBreakdown q = peak_memory(qlora_405b(cluster, mesh, BaseDtype::nf4));
    EXPECT_TRUE(q.fits()) << q.total / 1e9 << " GB";
    // Every rank holds its share of the base and the norms (126 x 2 + 1 of 16384, bf16) whole.
    const double norms = 2.0 * 4145152;
    EXPECT_NEAR(q.item("weights"), (215708794880.0 - norms) / double(devices) + norms, 1.0);
    EXPECT_FALSE(peak_memory(qlora_405b(cluster, mesh, BaseDtype::bf16)).fits());
    // The search agrees: some layout of that many devices fits with NF4, none with bf16.
    EXPECT_FALSE(search_layouts(qlora_405b(cluster, mesh, BaseDtype::nf4), devices).ranked.empty());
    EXPECT_TRUE(search_layouts(qlora_405b(cluster, mesh, BaseDtype::bf16), devices).ranked.empty());
  }
}

TEST(PlanFlops, MegatronFormulaByHand) {
  // 24*3*B*s*l*h^2 = 24*3*2*4*1*36 = 20736; (1 + 4/36 + 16/96) = 1.2777...; product 26496.
  EXPECT_NEAR(megatron_flops(2, 4, 1, 6, 16, false), 26496.0, 1e-9);
  EXPECT_NEAR(megatron_flops(2, 4, 1, 6, 16, true), 26496.0 * 4 / 3, 1e-9);
}

TEST(PlanFlops, GptModelFlopsPerToken) {
  const ModelShape g = model_preset("gpt-175b");
  const double h = 12288, l = 96, V = 50688, s = 2048;
  EXPECT_DOUBLE_EQ(model_flops_per_token(g, {}, 2048), 6 * (12 * l * h * h + V * h) + 12 * l * h * s);
  // Parameters: 12 l h^2 + 13 l h (biases, LayerNorms) + (V + 2048) h + 2h (the final LayerNorm),
  // the exact count FamilyPresets.ParameterCountsAreTheHandCountsAndThePublishedFigures checks.
  const int64_t n = total_params(model_parts(g, {}), g.layers(), false);
  EXPECT_EQ(n, 96 * (12 * int64_t(12288) * 12288 + 13 * 12288) + (50688 + 2048) * int64_t(12288) + 2 * 12288);
}

TEST(PlanCollectives, RingAlphaBeta) {
  const Link l{100e9, 1e-5};
  EXPECT_DOUBLE_EQ(ring_all_gather(1e9, 8, l), 7 * 1e-5 + 7.0 / 8.0 * 1e9 / 100e9);
  EXPECT_DOUBLE_EQ(ring_reduce_scatter(1e9, 8, l), ring_all_gather(1e9, 8, l));
  EXPECT_DOUBLE_EQ(ring_all_reduce(1e9, 8, l), 2 * (7 * 1e-5 + 7.0 / 8.0 * 1e9 / 100e9));
  EXPECT_DOUBLE_EQ(ring_all_reduce(1e9, 1, l), 0.0);
  EXPECT_DOUBLE_EQ(point_to_point(1e6, l), 1e-5 + 1e6 / 100e9);
}

TEST(PlanCollectives, AxisLinkIntraOrInterNode) {
  const Cluster c = cluster_preset("frontier");  // 8 GCDs per node
  const parallel::MeshShape m{2, 1, 4, 16};          // the 175B layout: tp 4 in a node, dp 2 x tp 4 = 8
  EXPECT_DOUBLE_EQ(axis_link(m, parallel::Axis::tp, c).bandwidth, c.intra.bandwidth * c.link_efficiency);
  EXPECT_DOUBLE_EQ(axis_link(m, parallel::Axis::dp, c).bandwidth, c.intra.bandwidth * c.link_efficiency);
  EXPECT_DOUBLE_EQ(axis_link(m, parallel::Axis::pp, c).bandwidth, c.inter.bandwidth * c.link_efficiency);
}

TEST(PlanTime, BubbleFraction) {
  PlanInput in = tiny_input({1, 1, 1, 2});
  in.global_batch = 8;
  const TimeBreakdown t = step_time(in);
  EXPECT_EQ(t.micro_batches, 8);
  EXPECT_DOUBLE_EQ(t.bubble_fraction, 1.0 / 9.0);  // (p-1)/(m+p-1)
  EXPECT_GT(t.bubble, 0.0);
  EXPECT_NEAR(t.step, t.compute + t.tp + t.pp + t.fsdp_exposed + t.bubble + t.dp_exposed + t.optimizer, 1e-12);
}

TEST(PlanTime, GemmEfficiencyGrowsWithSize) {
  const Cluster c = cluster_preset("mi300x-node");
  EXPECT_LT(gemm_efficiency(c, 64, 8192, 8192), gemm_efficiency(c, 4096, 8192, 8192));
  EXPECT_LT(gemm_efficiency(c, 1e6, 1e6, 1e6), c.gemm_efficiency);
  EXPECT_NEAR(gemm_efficiency(c, c.gemm_half_dim, 1e9, 1e9), c.gemm_efficiency / 2, 1e-12);
}

TEST(PlanSearch, ReturnsOnlyLayoutsThatFitAndDivide) {
  PlanInput base = tiny_input({1, 1, 1, 1});
  base.global_batch = 8;
  const SearchResult r = search_layouts(base, 4);
  ASSERT_FALSE(r.ranked.empty());
  EXPECT_GT(r.invalid, 0);  // tp 4 does not divide 2 KV heads
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    const auto& c = r.ranked[i];
    EXPECT_EQ(c.input.mesh.world(), 4);
    EXPECT_TRUE(c.memory.fits());
    EXPECT_EQ(2 % c.input.mesh.tp, 0);
    EXPECT_EQ(2 % c.input.mesh.pp, 0);
    EXPECT_EQ(8 % (c.input.micro_batch * c.input.data_parallel()), 0);
    if (i) {
      EXPECT_GE(r.ranked[i - 1].time.tokens_per_s, c.time.tokens_per_s);
    }
  }
  // Too small a device: nothing fits.
  base.cluster.memory_bytes = 1000;
  EXPECT_TRUE(search_layouts(base, 4).ranked.empty());
}

TEST(PlanInputs, BadInputThrows) {
  EXPECT_THROW(model_preset("llama9-1b"), Error);
  EXPECT_THROW(cluster_preset("tpu-pod"), Error);
  PlanInput in = tiny_input({1, 1, 1, 1});
  in.seq = 0;
  EXPECT_THROW(validate(in), Error);
  in = tiny_input({1, 1, 1, 1});
  in.global_batch = -4;
  EXPECT_THROW(validate(in), Error);
  in = tiny_input({1, 1, 4, 1});  // 2 KV heads over tp 4
  EXPECT_THROW(step_time(in), Error);
  in = tiny_input({1, 1, 1, 4});  // 2 layers over pp 4
  EXPECT_THROW(validate(in), Error);
  in = tiny_input({3, 1, 1, 1});
  in.global_batch = 4;  // not divisible by dp 3
  EXPECT_THROW(validate(in), Error);
  in = tiny_input({1, 1, 1, 1});
  in.zero = 4;
  EXPECT_THROW(validate(in), Error);
}

TEST(PlanCluster, TomlFileAndErrors) {
  const Cluster c = parse_cluster_toml(R"(
name = "two-node"
devices_per_node = 4
peak_tflops = 100
memory_gb = 32
memory_bandwidth_gbs = 1000
[intra]
bandwidth_gbs = 200
latency_us = 5
[inter]
bandwidth_gbs = 25
latency_us = 15
)", "c.toml");
  EXPECT_EQ(c.devices_per_node, 4);
  EXPECT_DOUBLE_EQ(c.peak_flops, 100e12);
  EXPECT_DOUBLE_EQ(c.inter.latency, 15e-6);
  EXPECT_THROW(parse_cluster_toml("devices_per_node = 4\n", "c.toml"), Error);
  EXPECT_THROW(parse_cluster_toml("peak_tflops = -1\n", "c.toml"), Error);
  EXPECT_THROW(parse_cluster_toml("bogus = 1\n", "c.toml"), Error);
}

}  // namespace
}  // namespace mt::plan
