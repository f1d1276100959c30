#include "data/json_records.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/bounded_json.h"
#include "core/error.h"
#include "core/regular_file.h"

namespace mt {
namespace {

bool is_blank(int c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// The bytes of a data input in order: a file is read 1 MiB at a time into one buffer (so reading
// it costs 1 MiB however large it is), a text in memory is used in place.
class Bytes {
 public:
  explicit Bytes(const DataInput& input) : name_("data file '" + input.path + "'") {
    if (input.text) {
      pos_ = input.text->data();
      end_ = pos_ + input.text->size();
      return;
    }
    std::error_code ec;
    if (!std::filesystem::exists(input.path, ec)) fail(name_ + " does not exist");
    if (std::filesystem::is_directory(input.path, ec))
      fail(name_ + " is a directory, expected a .json or .jsonl file");
    require_regular_file(input.path, "data file");
    file_.open(input.path, std::ios::binary);
    if (!file_) fail("cannot open " + name_);
    buffer_.resize(size_t(1) << 20);
  }

  const std::string& name() const { return name_; }
  // The offset of the next byte in the input.
  size_t offset() const { return offset_; }

  // The next byte without taking it, or -1 at the end.
  int peek() { return pos_ != end_ || refill() ? static_cast<unsigned char>(*pos_) : -1; }
  // The next byte, or -1 at the end.
  int get() {
    const int c = peek();
    if (c >= 0) ++pos_, ++offset_;
    return c;
  }

  // Appends the bytes up to the next '\n' (taken, not appended) or the end to `line`, stopping as
  // soon as `line` holds more than `cap` bytes: false then.
  bool read_line(std::string& line, size_t cap) {
    while (pos_ != end_ || refill()) {
      const char* newline = static_cast<const char*>(std::memchr(pos_, '\n', size_t(end_ - pos_)));
      const char* stop = newline ? newline : end_;
      line.append(pos_, stop);
      offset_ += size_t(stop - pos_);
      pos_ = stop;
      if (line.size() > cap) return false;
      if (newline) {
        get();
        return true;
      }
    }
    return true;
  }

 private:
  bool refill() {
    if (!file_.is_open()) return false;
    file_.read(buffer_.data(), std::streamsize(buffer_.size()));
    if (file_.bad()) fail("cannot read " + name_);
    pos_ = buffer_.data();
    end_ = pos_ + file_.gcount();
    return pos_ != end_;
  }

  std::string name_;
  std::ifstream file_;
  std::vector<char> buffer_;
  const char* pos_ = nullptr;
  const char* end_ = nullptr;
  size_t offset_ = 0;
};

std::string mib(size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

// Refuses a record that is valid JSON but not an object: the file is not a file of records
// (150 MB of numbers used to be parsed to its end before "no record is a JSON object").
JsonRecord checked_record(nlohmann::json value, std::string where, const std::string& file, std::string_view text) {
  if (!value.is_object()) {
    const std::string type = value.type_name();  // "number", "array", "null", ...
    fail(file + ": " + where + " is " + (type == "null" ? "" : type == "array" ? "an " : "a ") + type +
         ", not a JSON object: a data file holds one object per record");
  }
  return JsonRecord{std::move(value), std::move(where), text};
}

// JSON Lines from the start of the line numbered `first_line` (blank lines before it are read).
void for_each_line(Bytes& in, int64_t first_line, const std::function<bool(JsonRecord)>& visit) {
  const JsonLimits& limits = json_limits(JsonKind::data_record);
  std::string line;
  for (int64_t no = first_line; in.peek() >= 0; ++no) {
    line.clear();
    const std::string where = "line " + std::to_string(no);
    if (!in.read_line(line, limits.max_bytes))
      fail(in.name() + ": " + where + " is longer than the " + mib(limits.max_bytes) + " limit for " + limits.name);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json value = parse_json(line, JsonKind::data_record, in.name() + ": " + where);
    if (!visit(checked_record(std::move(value), where, in.name(), line))) return;
  }
}

// The elements of a JSON array, each cut out at the array's own level (tracking strings and
// nesting) and parsed on its own; the '[' is taken already.
void for_each_element(Bytes& in, const std::function<bool(JsonRecord)>& visit) {
  const JsonLimits& limits = json_limits(JsonKind::data_record);
  const std::string& file = in.name();
  auto skip_blanks = [&] {
    while (is_blank(in.peek())) in.get();
  };
  auto not_closed = [&] {
    fail(file + ": malformed JSON at byte offset " + std::to_string(in.offset()) +
         ": the array is not closed (file truncated?)");
  };
  std::string element;
  for (size_t index = 0;; ++index) {
    skip_blanks();
    if (in.peek() < 0) not_closed();
    if (in.peek() == ']' && index == 0) {
      in.get();
      break;
    }
    const size_t start = in.offset();
    const std::string where = "record " + std::to_string(index + 1);
    element.clear();
    int depth = 0;
    bool in_string = false;
    int c;
    for (;; element.push_back(char(in.get()))) {
      c = in.peek();
      if (c < 0) not_closed();
      if (in_string) {
        if (c == '\\') {
          element.push_back(char(in.get()));  // the escaped character cannot end the string
          if (in.peek() < 0) not_closed();
        } else if (c == '"') {
          in_string = false;
        }
      } else if (c == '"') {
        in_string = true;
      } else if (c == '[' || c == '{') {
        if (++depth > limits.max_depth)
          fail(file + ": " + where + " is nested deeper than " + std::to_string(limits.max_depth) +
               " levels at byte " + std::to_string(in.offset()));
      } else if (c == ']' || c == '}') {
        if (depth == 0) break;  // the array's own closing bracket (or a stray one)
        --depth;
      } else if (c == ',' && depth == 0) {
        break;
      }
      if (element.size() >= limits.max_bytes)  // checked as it is read: never more is held
        fail(file + ": " + where + " (at byte " + std::to_string(start) + ") is longer than the " +
             mib(limits.max_bytes) + " limit for " + limits.name);
    }
    if (c == '}') fail(file + ": malformed JSON at byte offset " + std::to_string(in.offset()) + ": unexpected '}'");
    while (!element.empty() && is_blank(element.back())) element.pop_back();
    if (element.empty())
      fail(file + ": malformed JSON at byte offset " + std::to_string(start) + ": " + where + " is empty");
    nlohmann::json value = parse_json(element, JsonKind::data_record,
                                      file + ": malformed JSON at byte offset " + std::to_string(start) + ": " + where);
    if (!visit(checked_record(std::move(value), where, file, element))) return;
    in.get();  // the comma or the closing bracket
    if (c == ']') break;
  }
  skip_blanks();
  if (in.peek() >= 0)
    fail(file + ": malformed JSON at byte offset " + std::to_string(in.offset()) + ": text after the array's end");
}

}  // namespace

bool for_each_json_record(const DataInput& input, const std::function<bool(JsonRecord)>& visit) {
  Bytes in(input);
  int64_t line = 1;  // the blank lines before the first record still count in JSON Lines' numbers
  while (is_blank(in.peek()))
    if (in.get() == '\n') ++line;
  if (in.peek() < 0) return false;
  if (std::filesystem::path(input.path).extension() != ".jsonl" && in.peek() == '[') {
    in.get();
    for_each_element(in, visit);
  } else {
    for_each_line(in, line, visit);
  }
  return true;
}

}  // namespace mt
