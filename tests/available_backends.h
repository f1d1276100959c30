// The backends a comparison test runs against the reference backend: the CPU always, and CUDA in
// a build configured with -DMESHTRAIN_CUDA=ON when a GPU answers. A backend that is not there
// comes with the reason, which the test prints as its skip message ("built without CUDA", "no GPU:
// ..."), so a CPU-only run says plainly what it did not check.
#pragma once
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#if MESHTRAIN_CUDA
#include "backend/cuda_backend.h"
#endif

namespace mt::test {

struct AvailableBackend {
  Backend* backend = nullptr;  // null when not available
  std::string why_not;
};

// The names comparison tests are instantiated with, available or not.
inline std::vector<std::string> comparison_backend_names() { return {"cpu", "cuda"}; }

inline AvailableBackend available_backend(const std::string& name) {
  if (name == "cpu") return {&cpu_backend(), ""};
  if (name != "cuda") return {nullptr, "unknown backend " + name};
#if MESHTRAIN_CUDA
  // Made once (GPU 0) and kept for the whole test program, like the CPU backend.
  static const AvailableBackend cuda = [] {
    try {
      static std::unique_ptr<Backend> b = make_cuda_backend(0);
      return AvailableBackend{b.get(), ""};
    } catch (const Error& e) {
      return AvailableBackend{nullptr, std::string("no GPU: ") + e.what()};
    }
  }();
  return cuda;
#else
  return {nullptr, "built without CUDA (configure with -DMESHTRAIN_CUDA=ON)"};
#endif
}

// A suite whose parameter is a backend's name: each test runs on tested(), or is skipped with the
// reason that backend is not there.
class BackendParamTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const AvailableBackend a = available_backend(GetParam());
    if (!a.backend) GTEST_SKIP() << GetParam() << ": " << a.why_not;
    tested_ = a.backend;
  }
  Backend& tested() { return *tested_; }

 private:
  Backend* tested_ = nullptr;
};

}  // namespace mt::test
