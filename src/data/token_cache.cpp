#include "data/token_cache.h"

#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <span>

#include "core/error.h"
#include "core/regular_file.h"
#include "data/chat_jinja.h"
#include "data/shuffle.h"
#include "core/atomic_file.h"

namespace mt {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'M', 'T', 'T', 'O', 'K', 'E', 'N', '1'};
// Bump when the rendering (templates, masking, skip rules) or the file layout changes, so old
// caches are not reused.
// 2: the skip warning names the length that keeps them; 3: never one above the model's limit;
// 4: a record that is not a JSON object refuses the file (it was a skip); 5: a ChatML template's
// default system prompt rendered; 6: chat rendered by the tokenizer's own Jinja chat_template;
// 7: messages' tool calls, tool results, reasoning_content and a record's tools rendered, and
// tokenizer_config.json's bos_token / eos_token given to templates
constexpr uint32_t kVersion = 7;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t format;
  uint64_t key;
  uint64_t n_examples;
  uint64_t n_tokens;
  int64_t records, skipped, too_long;
  uint64_t warning_len;
  uint64_t checksum;
};
static_assert(sizeof(Header) == 80, "the cache header layout is fixed");

// A fast 64-bit hash of a byte range (word at a time): catches torn or corrupted files, not
// adversaries.
uint64_t hash_bytes(const void* data, size_t n, uint64_t h = 0x243F6A8885A308D3ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, p + i, n - i);
  return splitmix64(h ^ tail ^ uint64_t(n));
}

uint64_t hash_string(std::string_view s) { return hash_bytes(s.data(), s.size()); }

uint64_t body_checksum(std::span<const uint64_t> offsets, std::span<const int32_t> tokens,
                       std::span<const uint8_t> trained, std::string_view warning) {
  uint64_t h = hash_bytes(offsets.data(), offsets.size_bytes());
  h = hash_bytes(tokens.data(), tokens.size_bytes(), h);
  h = hash_bytes(trained.data(), trained.size_bytes(), h);
  return hash_bytes(warning.data(), warning.size(), h);
}

std::string cache_key(const std::string& path, const Tokenizer& tok, const ExampleOptions& opt) {
  std::error_code ec;
  const fs::path abs = fs::weakly_canonical(fs::absolute(path), ec);
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) fail("data file '" + path + "': cannot read its size: " + ec.message());
  const auto mtime = fs::last_write_time(path, ec).time_since_epoch().count();
  // Built with += : "literal" + std::string here trips a false -Wrestrict in g++ 12.
  std::string key = "v";
  key += std::to_string(kVersion);
  for (const std::string& part :
       {abs.string(), std::to_string(size), std::to_string(mtime),
        std::to_string(tokenizer_fingerprint(tok)), std::string(format_name(opt.format)),
        std::to_string(opt.max_tokens), std::string(opt.truncate ? "truncate" : "skip"),
        std::to_string(opt.model_limit)}) {
    key += '|';
    key += part;
  }
  // Only when given, so that the files of runs without data.columns keep their names.
  for (const std::string& column : opt.columns) {
    key += "|column ";
    key += column;
  }
  // A template that writes today's date (strftime_now) renders differently tomorrow: the day is
  // part of the key, so yesterday's tokens are not reused (only for such templates).
  if (const std::string day = chat_template_day(tok.chat_template(), static_cast<long long>(std::time(nullptr)));
      !day.empty()) {
    key += "|day ";
    key += day;
  }
  return key;
}

template <class T>
void write_span(std::ostream& out, std::span<const T> s) {
  out.write(reinterpret_cast<const char*>(s.data()), std::streamsize(s.size_bytes()));
}

void write_cache(const std::string& file, uint64_t key, const ExampleSet& set,
                 const ExampleTable& table) {
  Header h{};
  std::memcpy(h.magic, kMagic, 8);
  h.version = kVersion;
  h.format = uint32_t(set.format);
  h.key = key;
  h.n_examples = table.size();
  h.n_tokens = uint64_t(table.total_tokens());
  h.records = set.records;
  h.skipped = set.skipped;
  h.too_long = set.too_long;
  h.warning_len = set.warning.size();
  h.checksum = body_checksum(table.offsets(), table.all_tokens(), table.all_trained(), set.warning);
  write_file_atomically(file, [&](std::ostream& out) {
    out.write(reinterpret_cast<const char*>(&h), sizeof h);
    write_span(out, table.offsets());
    write_span(out, table.all_tokens());
    write_span(out, table.all_trained());
    out.write(set.warning.data(), std::streamsize(set.warning.size()));
  });
}

// The cached examples, or nullopt with `why` set when the file is unusable.
std::optional<LoadedExamples> read_cache(const std::string& file, uint64_t key, std::string& why) {
  auto bad = [&](std::string reason) {
    why = std::move(reason);
    return std::nullopt;
  };
  MappedFile map(file);
  const auto bytes = map.bytes();
  if (bytes.size() < sizeof(Header)) return bad("shorter than its header");
  Header h;
  std::memcpy(&h, bytes.data(), sizeof h);
  if (std::memcmp(h.magic, kMagic, 8) != 0) return bad("bad magic");
  if (h.version != kVersion) return bad("version " + std::to_string(h.version));
  if (h.key != key) return bad("written for other data or options");
  if (h.format < uint32_t(DataFormat::kAlpaca) || h.format > uint32_t(DataFormat::kTextRecords))
    return bad("bad format field");
  // Sizes first, with overflow-safe bounds, so no view can reach past the mapping.
  const uint64_t avail = bytes.size() - sizeof(Header);
  if (h.n_examples >= avail / 8 || h.n_tokens > avail / 5 || h.warning_len > avail)
    return bad("truncated (sizes exceed the file)");
  const uint64_t need = (h.n_examples + 1) * 8 + h.n_tokens * 5 + h.warning_len;
  if (need != avail)
    return bad("size " + std::to_string(bytes.size()) + " does not match its header");
  const std::byte* p = bytes.data() + sizeof(Header);
  std::span<const uint64_t> offsets(reinterpret_cast<const uint64_t*>(p), h.n_examples + 1);
  p += offsets.size_bytes();
  std::span<const int32_t> tokens(reinterpret_cast<const int32_t*>(p), h.n_tokens);
  p += tokens.size_bytes();
  std::span<const uint8_t> trained(reinterpret_cast<const uint8_t*>(p), h.n_tokens);
  p += trained.size_bytes();
  std::string_view warning(reinterpret_cast<const char*>(p), h.warning_len);
  if (body_checksum(offsets, tokens, trained, warning) != h.checksum)
    return bad("checksum mismatch");
  if (offsets.front() != 0 || offsets.back() != h.n_tokens) return bad("bad offsets");
  for (size_t i = 1; i < offsets.size(); ++i)
    if (offsets[i] < offsets[i - 1]) return bad("bad offsets");
  LoadedExamples out;
  out.format = DataFormat(h.format);
  out.records = h.records;
  out.skipped = h.skipped;
  out.too_long = h.too_long;
  out.warning = std::string(warning);
  out.from_cache = true;
  out.cache_path = file;
  out.table = ExampleTable(std::move(map), offsets, tokens, trained);
  return out;
}

std::string hex16(uint64_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[size_t(i)] = digits[v & 15];
  return s;
}

}  // namespace

uint64_t tokenizer_fingerprint(const Tokenizer& tok) {
  std::string id = std::string(tok.kind()) + "|" + std::to_string(tok.vocab_size()) + "|" +
                   std::to_string(tok.bos_id()) + "|" + std::to_string(tok.eos_id());
  for (const auto& s : tok.special_tokens()) id += "|" + s.text + "=" + std::to_string(s.id);
  // What chat templates get as bos_token / eos_token (tokenizer_config.json's strings).
  id += "|bos_token " + tok.config_bos_token() + "|eos_token " + tok.config_eos_token();
  uint64_t h = hash_string(id);
  // The chat template beside the tokenizer decides how a chat file renders with format "auto".
  h = hash_bytes(tok.chat_template().data(), tok.chat_template().size(), h);
  const char* probes[] = {"Hello, world! 123 4567",
                          " The quick brown fox jumps over the lazy dog.\n\n### Response:\n",
                          "h\xC3\xA9llo w\xC3\xB6rld \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x99\x82\t<|eot_id|>"};
  for (const char* probe : probes) {
    const std::vector<int32_t> ids = tok.encode(probe);
    h = hash_bytes(ids.data(), ids.size() * sizeof(int32_t), h);
  }
  return h;
}

std::string default_cache_dir() {
  if (const char* d = std::getenv("MESHTRAIN_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/meshtrain/tokens";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/meshtrain/tokens";
  return (fs::temp_directory_path() / "meshtrain-tokens").string();
}

namespace {
std::string cache_file_name(const std::string& path, const std::string& cache_dir, uint64_t key) {
  const std::string dir = cache_dir.empty() ? default_cache_dir() : cache_dir;
  return (fs::path(dir) / (fs::path(path).stem().string() + "-" + hex16(key) + ".tokens")).string();
}
}  // namespace

std::string cache_file_for(const std::string& path, const Tokenizer& tok,
                           const ExampleOptions& options, const std::string& cache_dir) {
  return cache_file_name(path, cache_dir, hash_string(cache_key(path, tok, options)));
}

LoadedExamples load_examples(const std::string& path, const Tokenizer& tok,
                             const ExampleOptions& options, const std::string& cache_dir) {
  std::string file;
  uint64_t key = 0;
  if (cache_dir != "off") {
    std::error_code ec;
    require_regular_file(path, "data file");
    if (!fs::is_regular_file(path, ec)) fail("data file '" + path + "' does not exist or is not a file");
    key = hash_string(cache_key(path, tok, options));
    file = cache_file_name(path, cache_dir, key);
    if (fs::exists(file, ec)) {
      std::string why;
      std::optional<LoadedExamples> hit;
      try {
        hit = read_cache(file, key, why);
      } catch (const Error& e) {  // e.g. unreadable
        why = e.what();
      }
      if (hit) {
        if (!hit->warning.empty() && !options.quiet) std::cerr << hit->warning << "\n";
        return std::move(*hit);
      }
      std::cerr << "warning: token cache '" << file << "' is unusable (" << why
                << "); re-tokenising '" << path << "'\n";
    }
  }
  ExampleSet set = read_examples(path, tok, options);
  LoadedExamples out;
  out.table = ExampleTable(set.examples);
  out.format = set.format;
  out.records = set.records;
  out.skipped = set.skipped;
  out.too_long = set.too_long;
  out.warning = set.warning;
  if (!file.empty()) {
    try {
      write_cache(file, key, set, out.table);
      out.cache_path = file;
    } catch (const Error& e) {  // a cache is an optimisation: training goes on without it
      std::cerr << "warning: cannot write token cache: " << e.what() << "\n";
    }
  }
  return out;
}

}  // namespace mt
