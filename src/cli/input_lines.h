// The lines of a text input for the line-by-line verbs (tokenize, detokenize): a file, or standard
// input for "-".
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace mt::cli {

// Calls `visit(line, where)` for each line of `path` ("-": standard input) without its line ending
// ("\n" or "\r\n"); a last line without a newline counts, an empty file has none. `where` names the
// line ("data.txt:3", "stdin:3") for error messages. A path that is not a regular file, or cannot be
// opened or read, is refused in one line, and so is a line longer than `max_line_bytes`, as soon as
// that much of it has been read ("data.txt:3 is longer than the 16 MiB limit for an input line"):
// memory is bounded by the limit, never by the line (a 2 GB line was read whole).
void for_each_input_line(const std::string& path, size_t max_line_bytes,
                         const std::function<void(std::string_view line, const std::string& where)>& visit);

// Whether `s` is valid UTF-8 (JSON text must be).
bool is_valid_utf8(std::string_view s);

}  // namespace mt::cli
