// The floors of src/ include one way down (docs/architecture.md). This test reads every source
// file's #include "..." lines and fails on any include a floor may not make, e.g. the model
// reaching for a CPU kernel, the trainer or the mesh, or the parallel layer for the trainer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// The floor a path under src/ belongs to: its directory, with kernels split by implementation.
std::string floor_of(const std::string& rel) {
  const auto slash = rel.find('/');
  const std::string dir = rel.substr(0, slash);
  if (dir != "kernels") return dir;
  return rel.substr(0, rel.find('/', slash + 1));  // kernels/cpu, kernels/cuda, ...
}

// What each floor may include, itself included. Lower floors never see higher ones; io and data
// are siblings that never include each other.
const std::map<std::string, std::set<std::string>>& allowed() {
  static const std::map<std::string, std::set<std::string>> rules = {
      {"core", {"core"}},
      {"kernels/device_math", {"core", "kernels/device_math"}},
      {"kernels/cpu", {"core", "kernels/device_math", "kernels/cpu"}},
      {"kernels/reference", {"core", "kernels/device_math", "kernels/reference"}},
      // kernels/cuda_on_cpu: the emulated CUDA runtime and libraries of the CPU-executed build,
      // which GPU code reaches only through kernels/cuda's vendor headers (vendor_cpu.h).
      {"kernels/cuda_on_cpu", {"core", "kernels/device_math", "kernels/cuda_on_cpu"}},
      {"kernels/cuda", {"core", "kernels/device_math", "kernels/cuda", "kernels/cuda_on_cpu"}},
      {"backend", {"core", "kernels/device_math", "kernels/cpu", "kernels/reference",
                   "kernels/cuda", "backend"}},
      {"model", {"core", "backend", "model"}},
      {"io", {"core", "backend", "model", "io"}},
      {"data", {"core", "data"}},
      // kernels/cuda: NCCL's comm (parallel/nccl_comm.cu) reaches the vendor runtime and NCCL
      // through its one include (kernels/cuda/nccl_runtime.h), as GPU code must.
      {"parallel", {"core", "backend", "model", "io", "data", "parallel", "kernels/cuda"}},
      {"train", {"core", "backend", "model", "io", "data", "parallel", "train"}},
      {"plan", {"core", "backend", "model", "io", "data", "parallel", "train", "plan"}},
      {"report", {"core", "report"}},
      {"cli", {"core", "backend", "model", "io", "data", "parallel", "train", "plan", "report", "cli"}},
  };
  return rules;
}

TEST(Layering, IncludesGoOneWayDown) {
  const fs::path src = fs::path(MESHTRAIN_SOURCE_DIR) / "src";
  const std::regex include_line(R"(^\s*#\s*include\s+"([^"]+)\")");
  std::vector<std::string> violations;
  int64_t includes_seen = 0;
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    const std::string ext = entry.path().extension().string();
    if (!entry.is_regular_file() || (ext != ".h" && ext != ".cpp" && ext != ".cu")) continue;
    const std::string rel = fs::relative(entry.path(), src).generic_string();
    const std::string from = floor_of(rel);
    const auto rule = allowed().find(from);
    if (rule == allowed().end()) {
      violations.push_back(rel + ": directory '" + from + "' has no floor in this test's table");
      continue;
    }
    std::ifstream in(entry.path());
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      std::smatch m;
      if (!std::regex_search(line, m, include_line)) continue;
      const std::string target = m[1].str();
      if (target.find('/') == std::string::npos) continue;  // not a path under src/
      ++includes_seen;
      const std::string to = floor_of(target);
      if (!rule->second.count(to))
        violations.push_back(rel + ":" + std::to_string(n) + " (" + from + ") includes " + target +
                             " (" + to + ")");
    }
  }
  // The scan itself must have found the project's includes, or it would prove nothing.
  EXPECT_GT(includes_seen, 500);
  for (const auto& v : violations) ADD_FAILURE() << v;
}

// The issue-level promises, named so a failure says which one broke.
TEST(Layering, ModelKnowsNeitherKernelsNorTrainerNorMesh) {
  EXPECT_FALSE(allowed().at("model").count("kernels/cpu"));
  EXPECT_FALSE(allowed().at("model").count("train"));
  EXPECT_FALSE(allowed().at("model").count("parallel"));
  EXPECT_FALSE(allowed().at("parallel").count("train"));
  EXPECT_FALSE(allowed().at("io").count("data"));
  EXPECT_FALSE(allowed().at("data").count("io"));
}

// No device work from an OpenMP worker thread. A device backend issues its work from the thread
// that owns its device and stream (cudaSetDevice runs on that thread only): an op issued from an
// OpenMP worker would go to another device's stream, and an exception thrown there cannot leave
// the OpenMP region (std::terminate). So OpenMP parallel regions live only where no backend call
// can happen inside them:
//   src/kernels/cpu            the CPU kernels (pointer loops; they call no backend)
//   src/core                   host-memory helpers (bf16 conversion, RoPE tables); no backend
//   src/backend/cpu_backend.cpp  the CPU backend's own copy_boxes, over its own memory; it catches
//                              every exception inside the region and rethrows it after
//   src/kernels/cuda_on_cpu    (if present) an emulator's threads executing a launched kernel's
//                              blocks: the device's own execution, not host code issuing work
// Code elsewhere that wants a batch of device work asks the backend for it in one call (e.g.
// Backend::copy_boxes, which FSDP's gathers and reduce-scatters use). omp_* calls that only set
// or read the thread count (the trainer, bench) are not parallel regions and are allowed.
TEST(Layering, OpenMpRegionsOnlyWhereNoDeviceWorkIsIssued) {
  const fs::path src = fs::path(MESHTRAIN_SOURCE_DIR) / "src";
  const std::regex pragma_omp(R"(^\s*#\s*pragma\s+omp\b)");
  const std::vector<std::string> allowed_prefixes = {"kernels/cpu/", "core/", "backend/cpu_backend.cpp",
                                                     "kernels/cuda_on_cpu/"};
  std::vector<std::string> violations;
  int64_t regions_seen = 0;
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    const std::string ext = entry.path().extension().string();
    if (!entry.is_regular_file() || (ext != ".h" && ext != ".cpp" && ext != ".cu")) continue;
    const std::string rel = fs::relative(entry.path(), src).generic_string();
    bool ok = false;
    for (const auto& p : allowed_prefixes) ok = ok || rel.rfind(p, 0) == 0;
    std::ifstream in(entry.path());
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      if (!std::regex_search(line, pragma_omp)) continue;
      ++regions_seen;
      if (!ok) violations.push_back(rel + ":" + std::to_string(n) + ": " + line);
    }
  }
  // The CPU kernels are full of them: a scan that saw none proves nothing.
  EXPECT_GT(regions_seen, 20);
  for (const auto& v : violations)
    ADD_FAILURE() << v << "\n  (an OpenMP region outside the CPU kernels: a device backend's work must not be "
                          "issued from its threads; see this test's comment)";
}

}  // namespace
