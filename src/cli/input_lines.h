// The lines of a text input for the line-by-line verbs (tokenize, detokenize): a file, or standard
// input for "-".
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace mt::cli {

// Calls `visit(line, where)` for each line of `path` ("-": standard input) without its line ending
// ("\n" or "\r\n"); a last line without a newline counts, an empty file has none. `where` names the
// line ("data.txt:3", "stdin:3") for error messages. A path that is not a regular file, or cannot be
// opened or read, is refused in one line.
void for_each_input_line(const std::string& path,
                         const std::function<void(std::string_view line, const std::string& where)>& visit);

// Whether `s` is valid UTF-8 (JSON text must be).
bool is_valid_utf8(std::string_view s);

}  // namespace mt::cli
