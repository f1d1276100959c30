// An error in FSDP's packing or unpacking of a unit (Backend::copy_boxes, parallel/fsdp_units.cpp)
// arrives on the model's thread as an mt::Error, on every rank alike, as any backend error does:
// the copies are issued from that thread (no OpenMP region around device work), so nothing ends
// the process in std::terminate. The backend here is the far-memory test backend (a device's
// memory to host code, tests/far_memory_backend.h) with box copies that fail when armed; the
// device buffers travel host-staged (train.device_comm = "staged").
#include <gtest/gtest.h>

#include "../far_memory_backend.h"
#include "core/error.h"
#include "parallel/device_comms.h"
#include "parallel/mesh.h"
#include "parallel/sharded_model.h"
#include "train/run_config.h"

namespace mt::parallel {
namespace {

class FailingCopies final : public testing::FarMemoryBackend {
 public:
  bool armed = false;
  void copy_box(const Tensor& src, const TensorBox& src_box, const Tensor& dst, const TensorBox& dst_box,
                const TensorBox& region) override {
    if (armed) fail("copy_box: injected failure");
    FarMemoryBackend::copy_box(src, src_box, dst, dst_box, region);
  }
};

TEST(FsdpErrors, ACopyErrorInAGatherOrReduceScatterIsAnMtError) {
  ASSERT_TRUE(launched_with_mpi()) << "run under mpirun";
  auto world = make_world_comm();
  if (world->size() % 2) GTEST_SKIP() << "needs an even world";
  Mesh mesh(*world, MeshShape::parse("dp=" + std::to_string(world->size() / 2) + ",fsdp=2"));
  FailingCopies dev;
  attach_device_comms(mesh, dev, DeviceCommKind::staged);
  const RunConfig cfg = parse_run_config(default_run_config_toml(), {}, "<test>");
  ShardedModel model(mesh, cfg.model, Precision::fp32, LoraConfig{}, cfg.partition.effective(), {}, dev);
  model.init_weights(1);
  // A block's gather: the unpacking of the gathered pieces fails.
  dev.armed = true;
  try {
    model.acquire(1, false, true);
    ADD_FAILURE() << "no error from the gather";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("injected failure"), std::string::npos) << e.what();
  }
  // A block's reduce-scatter: the packing of its gradient fails.
  dev.armed = false;
  model.acquire(2, true, true);
  dev.armed = true;
  try {
    model.release(2, true);
    ADD_FAILURE() << "no error from the reduce-scatter";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("injected failure"), std::string::npos) << e.what();
  }
  dev.armed = false;
}

}  // namespace
}  // namespace mt::parallel
