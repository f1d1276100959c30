// make_cuda_backend's answer when the GPU asked for cannot be used: one mt::Error line naming the
// device asked for and what was found. On a machine without a GPU (CI) every index fails that way;
// on one with a GPU an index past the devices does.
#include <gtest/gtest.h>

#include <iostream>
#include <string>

#include "core/error.h"
#if MESHTRAIN_CUDA
#include "backend/cuda_backend.h"
#endif

namespace mt {
namespace {

#if MESHTRAIN_CUDA
std::string error_of_device(int index) {
  try {
    make_cuda_backend(index);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CudaBackend, UnusableGpuIsOneClearLine) {
  const std::string past = error_of_device(4096);  // no machine has this many GPUs
  ASSERT_FALSE(past.empty()) << "GPU 4096 was accepted";
  EXPECT_EQ(past.find('\n'), std::string::npos) << past;
  EXPECT_EQ(past.rfind("device cuda:4096: no usable GPU: ", 0), 0u) << past;
  const std::string first = error_of_device(0);
  if (first.empty()) {  // a GPU is here: the error above must have named the count found
    EXPECT_NE(past.find("GPU 4096 asked for"), std::string::npos) << past;
  } else {
    EXPECT_EQ(first.find('\n'), std::string::npos) << first;
    EXPECT_EQ(first.rfind("device cuda:0: no usable GPU: ", 0), 0u) << first;
    std::cout << "[ info ] " << first << "\n";
  }
}
#else
TEST(CudaBackend, UnusableGpuIsOneClearLine) {
  GTEST_SKIP() << "built without CUDA (configure with -DMESHTRAIN_CUDA=ON)";
}
#endif

}  // namespace
}  // namespace mt
