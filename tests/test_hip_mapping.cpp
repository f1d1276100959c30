// The HIP vendor mapping (src/kernels/cuda/vendor_hip.h) covers every CUDA name the GPU sources
// use. A HIP build sees the CUDA spellings only through that header's #defines, so a name used in
// a GPU source and missing there is a compile error on AMD that no NVIDIA build shows; hipcc is
// not on every machine (scripts/hip_compile_check.sh compiles what Debian's ROCm can), so this
// scan is the check that runs everywhere. It reads the GPU sources (src/kernels/cuda, the CUDA
// backend's files and NCCL's comm), drops comments, string literals and #include lines, collects
// every cuda*/cublas*/CUBLAS*/CUDA_* and __nv_* identifier, and requires each to be #defined (or
// declared with `using`) in vendor_hip.h. CUB's names are mapped as a namespace (gpu_sort.h);
// NCCL's need no mapping (RCCL keeps them).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The code of a C++ source without #include lines, comments, and string and character literals.
std::string code_only(const std::string& source) {
  static const std::regex include_line(R"(^\s*#\s*include)");
  std::string text, line;
  std::istringstream lines(source);
  while (std::getline(lines, line))
    if (!std::regex_search(line, include_line)) text += line + '\n';
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, 2, "//") == 0) {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (text.compare(i, 2, "/*") == 0) {
      const size_t end = text.find("*/", i + 2);
      i = end == std::string::npos ? text.size() : end + 2;
    } else if (text[i] == '"' || text[i] == '\'') {
      const char q = text[i++];
      while (i < text.size() && text[i] != q) i += text[i] == '\\' ? 2 : 1;
      ++i;
      out += ' ';
    } else {
      out += text[i++];
    }
  }
  return out;
}

bool is_gpu_source(const std::string& rel) {
  // The vendor headers themselves (vendor_hip.h, and any other vendor's: they define the names).
  if (rel.rfind("kernels/cuda/vendor_", 0) == 0) return false;
  const std::string ext = fs::path(rel).extension().string();
  if (ext != ".cu" && ext != ".h" && ext != ".cpp") return false;
  return rel.rfind("kernels/cuda/", 0) == 0 || rel.rfind("backend/cuda_", 0) == 0 ||
         rel.rfind("parallel/nccl_", 0) == 0;
}

TEST(HipMapping, EveryCudaNameTheGpuSourcesUseIsMapped) {
  const fs::path src = fs::path(MESHTRAIN_SOURCE_DIR) / "src";
  const std::string mapping = read(src / "kernels/cuda/vendor_hip.h");
  const std::regex vendor_name(R"(\b(cuda[A-Z]\w*|cublas\w*|CUBLAS\w*|CUDA_\w+|__nv_\w+))");
  std::map<std::string, std::string> used;  // name -> first file using it
  bool uses_cub = false;
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    if (!entry.is_regular_file()) continue;
    const std::string rel = fs::relative(entry.path(), src).generic_string();
    if (!is_gpu_source(rel)) continue;
    ++files;
    const std::string code = code_only(read(entry.path()));
    for (std::sregex_iterator it(code.begin(), code.end(), vendor_name), end; it != end; ++it)
      used.emplace((*it)[1].str(), rel);
    uses_cub = uses_cub || code.find("cub::") != std::string::npos;
  }
  // The scan must have seen the sources and their names, or it would prove nothing.
  EXPECT_GT(files, 30);
  EXPECT_GT(used.size(), 60u);
  EXPECT_TRUE(used.count("cudaStream_t"));
  EXPECT_TRUE(used.count("cublasLtMatmul"));
  for (const auto& [name, file] : used) {
    const std::regex mapped("(#define|using)\\s+" + name + "\\b");
    EXPECT_TRUE(std::regex_search(mapping, mapped))
        << name << " (used in src/" << file << ") has no mapping in src/kernels/cuda/vendor_hip.h";
  }
  if (uses_cub) {
    EXPECT_NE(read(src / "kernels/cuda/gpu_sort.h").find("namespace cub = hipcub;"), std::string::npos)
        << "the sources use cub:: but gpu_sort.h does not map it to hipCUB";
  }
}

// The scan's own filter: comments, strings and includes do not count as uses.
TEST(HipMapping, CommentsStringsAndIncludesAreNotUses) {
  const std::string code = code_only(
      "#include <cublasLt.h>\n// cudaFoo in a comment\n/* cudaBar */ f(\"cudaBaz\"); cudaQux(x);\n");
  EXPECT_EQ(code.find("cudaFoo"), std::string::npos);
  EXPECT_EQ(code.find("cudaBar"), std::string::npos);
  EXPECT_EQ(code.find("cudaBaz"), std::string::npos);
  EXPECT_EQ(code.find("cublasLt"), std::string::npos);
  EXPECT_NE(code.find("cudaQux"), std::string::npos);
}

}  // namespace
