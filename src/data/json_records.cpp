#include "data/json_records.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/bounded_json.h"
#include "core/error.h"
#include "core/regular_file.h"

namespace mt {

std::string read_data_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail("data file '" + path + "' does not exist");
  if (std::filesystem::is_directory(path, ec))
    fail("data file '" + path + "' is a directory, expected a .json or .jsonl file");
  require_regular_file(path, "data file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open data file '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail("cannot read data file '" + path + "'");
  return ss.str();
}

bool is_json_lines(const std::string& path, std::string_view text) {
  if (std::filesystem::path(path).extension() == ".jsonl") return true;
  return text[text.find_first_not_of(" \t\r\n")] != '[';
}

void for_each_json_record(const std::string& path, std::string_view text,
                          const std::function<bool(JsonRecord)>& visit) {
  const std::string file = "data file '" + path + "'";
  if (is_json_lines(path, text)) {
    std::string_view rest = text;
    for (int64_t no = 1; !rest.empty(); ++no) {
      const size_t end = rest.find('\n');
      const std::string_view line = rest.substr(0, end);
      rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
      if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
      const std::string where = "line " + std::to_string(no);
      if (!visit(JsonRecord{parse_json(line, JsonKind::data_record, file + ": " + where), where})) return;
    }
    return;
  }
  struct Stop {};  // ends the array's walk early
  try {
    for_each_json_array_element(text, JsonKind::data_record, file,
                                [&](std::string_view element, size_t index, size_t offset) {
                                  const std::string where = "record " + std::to_string(index + 1);
                                  nlohmann::json value = parse_json(element, JsonKind::data_record,
                                                                    file + ": malformed JSON at byte offset " +
                                                                        std::to_string(offset) + ": " + where);
                                  if (!visit(JsonRecord{std::move(value), where})) throw Stop{};
                                });
  } catch (const Stop&) {
  }
}

std::vector<JsonRecord> parse_json_records(const std::string& path, std::string_view text) {
  std::vector<JsonRecord> out;
  for_each_json_record(path, text, [&](JsonRecord r) {
    out.push_back(std::move(r));
    return true;
  });
  return out;
}

}  // namespace mt
