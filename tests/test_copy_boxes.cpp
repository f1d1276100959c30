// Backend::copy_boxes, the batch of box copies FSDP packs and unpacks a unit with: the CPU
// backend's (spread over OpenMP threads) equals the copies made one by one, and an error in one
// copy inside its OpenMP region arrives on the calling thread as an mt::Error instead of ending
// the process (an exception leaving an OpenMP region is std::terminate). That last check runs in a
// child process (this test binary again, one test of it), so that the defect it guards against
// fails the test instead of killing the whole test binary.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "child_process.h"
#include "core/error.h"
#include "temp_dirs.h"

namespace mt {
namespace {

// `count` copies of [rows, cols] blocks (f32), each from a buffer of its own into its column
// block of one [rows, count * cols] destination: disjoint destinations, together over 2^16
// elements, so the CPU backend takes its parallel path.
struct Batch {
  static constexpr int64_t count = 64, rows = 32, cols = 48;
  std::vector<float> src = std::vector<float>(size_t(count * rows * cols));
  std::vector<float> dst = std::vector<float>(src.size(), -1.0f);
  std::vector<BoxCopy> copies;

  Batch() {
    for (size_t i = 0; i < src.size(); ++i) src[i] = float(i) * 0.25f;
    Backend& b = cpu_backend();
    const TensorBox dst_box = TensorBox::whole({rows, count * cols});
    for (int64_t k = 0; k < count; ++k) {
      // Copy k: the destination's column block k, held by source buffer k (rows x cols).
      const TensorBox block{{0, k * cols}, {rows, (k + 1) * cols}};
      copies.push_back({b.view(src.data() + k * rows * cols, DType::f32, 1, rows * cols), block,
                        b.view(dst.data(), DType::f32, 1, rows * count * cols), dst_box, block});
    }
  }
};

TEST(CopyBoxes, CpuBatchEqualsTheCopiesOneByOne) {
  Batch batch, one_by_one;
  ASSERT_GT(Batch::count * Batch::rows * Batch::cols, 1 << 16);  // the parallel path
  cpu_backend().copy_boxes(batch.copies);
  for (const BoxCopy& c : one_by_one.copies) cpu_backend().copy_box(c.src, c.src_box, c.dst, c.dst_box, c.region);
  EXPECT_EQ(batch.dst, one_by_one.dst);
  // And what the copies mean: block k of the destination's columns is source block k.
  EXPECT_EQ(batch.dst[size_t(1 * Batch::count * Batch::cols + 5 * Batch::cols + 7)],
            batch.src[size_t(5 * Batch::rows * Batch::cols + 1 * Batch::cols + 7)]);
  for (float x : batch.dst) ASSERT_NE(x, -1.0f);
}

// Run only in the child that the next test starts: copy 37 of 64 is misused (an f32 source into a
// bf16 destination), which the backend's checks refuse inside the parallel loop.
TEST(CopyBoxesChild, ErrorInsideTheParallelLoopIsAnMtError) {
  if (!std::getenv("MESHTRAIN_COPY_BOXES_CHILD")) GTEST_SKIP() << "run by CopyBoxes.ErrorInsideTheParallelLoopArrivesOnTheCallingThread";
  Batch batch;
  std::vector<uint16_t> wrong(batch.dst.size());
  batch.copies[37].dst = cpu_backend().view(wrong.data(), DType::bf16, 1, int64_t(wrong.size()));
  try {
    cpu_backend().copy_boxes(batch.copies);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("differ in dtype"), std::string::npos) << e.what();
    std::printf("caught: %s\n", e.what());
  }
}

TEST(CopyBoxes, ErrorInsideTheParallelLoopArrivesOnTheCallingThread) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string log = testing::fresh_temp_dir("copy_boxes_child") + "/child.log";
  testing::ChildProcess child(testing::WholeCommand{},
                              {"env", "OMP_NUM_THREADS=2", "MESHTRAIN_COPY_BOXES_CHILD=1", self,
                               "--gtest_filter=CopyBoxesChild.ErrorInsideTheParallelLoopIsAnMtError"},
                              log);
  ASSERT_TRUE(child.started());
  ASSERT_TRUE(child.wait(120)) << child.log();
  // A std::terminate would be -SIGABRT here.
  EXPECT_EQ(child.result(), 0) << child.log();
  EXPECT_NE(child.log().find("caught: copy_box"), std::string::npos) << child.log();
  EXPECT_NE(child.log().find("[  PASSED  ] 1 test"), std::string::npos) << child.log();
}

}  // namespace
}  // namespace mt
