// The planner prices what the CUDA backend holds for an MoE layer's grouped expert products
// (Backend::matmul_group: group_streams - 1 side streams, a 32 MiB cuBLASLt workspace each,
// backend/cuda_group_streams.h) on an accelerator cluster, where a rank's expert products group;
// not for a dense model, one expert a rank, 4-bit experts, or a CPU host. In-process and
// shape-only.
#include <gtest/gtest.h>

#include <string>

#include "backend/cuda_group_streams.h"
#include "plan/memory_model.h"
#include "plan/model_shape.h"

namespace mt::testing {
namespace {

using plan::PlanInput;

PlanInput run_of(const std::string& preset, const std::string& cluster, const std::string& mesh) {
  PlanInput in;
  in.model = plan::model_preset(preset);
  in.cluster = plan::cluster_preset(cluster);
  in.mesh = parallel::MeshShape::parse(mesh);
  in.seq = 1024, in.micro_batch = 1, in.global_batch = in.mesh.batch_ranks();
  return in;
}

constexpr const char* kItem = "expert stream workspaces";

TEST(PlanGroupStreams, AnMoeOnGpusHoldsThreeSideStreamsWorkspaces) {
  EXPECT_EQ(cuda_group_workspace_bytes(), 3.0 * double(size_t(32) << 20));
  EXPECT_EQ(cuda_group_workspace_bytes(1), 0.0);
  for (const std::string mesh : {"fsdp=8", "ep=4", "ep=2,tp=4"}) {  // 8, 2, 4 experts a rank
    SCOPED_TRACE(mesh);
    const PlanInput in = run_of("mixtral-8x7b", "dgx-h100", mesh);
    const plan::MemoryBreakdown m = plan::peak_memory(in);
    EXPECT_EQ(m.item(kItem), cuda_group_workspace_bytes());
    double sum = 0.0;
    for (const plan::MemoryItem& i : m.items) sum += i.bytes;
    EXPECT_EQ(m.total, sum);  // counted in the total
  }
  // LoRA on a bf16 base groups the frozen experts' products too.
  PlanInput lora = run_of("qwen3-30b-a3b", "mi300x-node", "fsdp=8");
  lora.lora.enabled = true;
  EXPECT_EQ(plan::peak_memory(lora).item(kItem), cuda_group_workspace_bytes());
}

TEST(PlanGroupStreams, NoneWhereTheProductsNeverGroup) {
  // A dense model; one expert a rank (ep = 8 of Mixtral's 8); QLoRA's 4-bit experts; a CPU host.
  EXPECT_EQ(plan::peak_memory(run_of("mistral-7b", "dgx-h100", "fsdp=8")).item(kItem), 0.0);
  EXPECT_EQ(plan::peak_memory(run_of("mixtral-8x7b", "dgx-h100", "ep=8")).item(kItem), 0.0);
  PlanInput qlora = run_of("mixtral-8x7b", "dgx-h100", "fsdp=8");
  qlora.lora.enabled = true, qlora.base_dtype = plan::BaseDtype::nf4;
  EXPECT_EQ(plan::peak_memory(qlora).item(kItem), 0.0);
  EXPECT_EQ(plan::peak_memory(run_of("mixtral-8x7b", "cpu", "dp=1")).item(kItem), 0.0);
}

}  // namespace
}  // namespace mt::testing
