#include "data/tokenizer_files.h"

#include <filesystem>

#include "core/atomic_file.h"
#include "data/tokenizer.h"

namespace mt {

std::vector<std::string> save_tokenizer_files(const std::string& tokenizer_path,
                                              const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> written;
  if (tokenizer_path.empty() ||
      std::filesystem::path(tokenizer_path).filename() == kByteTokenizerFile) {
    const std::string marker = (fs::path(dir) / kByteTokenizerFile).string();
    write_file_atomically(marker, [](std::ostream& os) {
      os << "meshtrain byte-level tokenizer: token id = byte value (0..255)\n";
    });
    return {marker};
  }
  fs::path src(find_tokenizer_file(tokenizer_path));
  std::vector<fs::path> files = {src};
  if (src.filename() == "vocab.json") files.push_back(src.parent_path() / "merges.txt");
  for (const auto& f : files) {
    fs::path dst = fs::path(dir) / f.filename();
    if (fs::exists(dst) && fs::equivalent(f, dst)) continue;
    fs::copy_file(f, dst, fs::copy_options::overwrite_existing);
    fs::permissions(dst, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::add);
    written.push_back(dst.string());
  }
  return written;
}

}  // namespace mt
