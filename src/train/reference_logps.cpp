#include "train/reference_logps.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/atomic_file.h"
#include "core/crc32c.h"
#include "core/error.h"
#include "core/regular_file.h"

namespace mt {

namespace {

constexpr char kMagic[8] = {'M', 'T', 'R', 'E', 'F', 'L', 'P', '1'};
constexpr size_t kRecord = 16;  // f64 sum, i64 tokens

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
template <class T>
T get(const std::string& in, size_t at) {
  T v;
  std::memcpy(&v, in.data() + at, sizeof v);
  return v;
}

}  // namespace

void write_reference_logps(const std::string& path, const std::vector<CompletionLogp>& values) {
  std::string bytes(kMagic, sizeof kMagic);
  put<uint64_t>(bytes, values.size());
  for (const CompletionLogp& v : values) put<double>(bytes, v.sum), put<int64_t>(bytes, v.tokens);
  put<uint32_t>(bytes, crc32c(bytes.data(), bytes.size()));
  write_file_atomically(path, [&](std::ostream& os) { os.write(bytes.data(), std::streamsize(bytes.size())); });
}

std::vector<CompletionLogp> read_reference_logps(const std::string& path, int64_t expected) {
  const std::string what = "reference log-probabilities " + path;
  if (!std::filesystem::exists(path))
    fail(what + " are missing: a resumed run cannot compute them again (its model has trained); resume in the "
                "run's own output.dir, or start the run afresh");
  require_regular_file(path, "reference log-probabilities");
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < sizeof kMagic + 12 || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    fail(what + ": not a meshtrain reference file (damaged)");
  const uint64_t n = get<uint64_t>(bytes, sizeof kMagic);
  const size_t body = sizeof kMagic + 8;
  if (n > (bytes.size() - body) / kRecord || bytes.size() != body + n * kRecord + 4)
    fail(what + ": its size does not match its count of " + std::to_string(n) + " (damaged)");
  if (get<uint32_t>(bytes, bytes.size() - 4) != crc32c(bytes.data(), bytes.size() - 4))
    fail(what + ": checksum mismatch (damaged)");
  if (int64_t(n) != expected)
    fail(what + " hold " + std::to_string(n) + " sequences, the data " + std::to_string(expected) +
         ": the data changed since the run started");
  std::vector<CompletionLogp> out(n);
  for (size_t i = 0; i < n; ++i) {
    out[i] = {get<double>(bytes, body + i * kRecord), get<int64_t>(bytes, body + i * kRecord + 8)};
    if (!std::isfinite(out[i].sum) || out[i].tokens <= 0)
      fail(what + ": sequence " + std::to_string(i) + " holds no finite value (damaged)");
  }
  return out;
}

}  // namespace mt
