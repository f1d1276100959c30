// The documentation holds together: every relative link in README.md and docs/*.md reaches a file
// that exists (and, for a link into a Markdown page, a heading of that page), and the README stays
// short enough to read in five minutes (issue 23: its reference material lives in docs/).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "text_files.h"
#include "temp_dirs.h"

namespace {

namespace fs = std::filesystem;
using mt::testing::read_file;

const fs::path kSource = MESHTRAIN_SOURCE_DIR;
constexpr size_t kReadmeMaxLines = 260;

// The text with fenced code blocks (and their fence lines) blanked, newlines kept, so that a
// `# comment` in a shell block is not taken for a heading.
std::string without_fences(const std::string& markdown) {
  std::string out;
  bool fenced = false;
  size_t at = 0;
  while (at < markdown.size()) {
    size_t end = markdown.find('\n', at);
    if (end == std::string::npos) end = markdown.size();
    const std::string line = markdown.substr(at, end - at);
    const size_t first = line.find_first_not_of(' ');
    const bool fence = first != std::string::npos && line.compare(first, 3, "```") == 0;
    if (fence) fenced = !fenced;
    out += (fence || fenced) ? std::string() : line;
    out += '\n';
    at = end + 1;
  }
  return out;
}

// The text with fenced code blocks and inline code spans blanked (newlines kept), so that a
// `[a](b)` shown as code is not taken for a link.
std::string prose_of(const std::string& markdown) {
  const std::string out = without_fences(markdown);
  // Inline code: a run of backticks up to the same run (CommonMark), possibly across a line break.
  std::string prose;
  for (size_t i = 0; i < out.size();) {
    if (out[i] != '`') {
      prose += out[i++];
      continue;
    }
    size_t run = 0;
    while (i + run < out.size() && out[i + run] == '`') ++run;
    const size_t close = out.find(std::string(run, '`'), i + run);
    if (close == std::string::npos) {
      prose += out.substr(i, run);
      i += run;
      continue;
    }
    for (size_t k = i; k < close + run; ++k) prose += out[k] == '\n' ? '\n' : ' ';
    i = close + run;
  }
  return prose;
}

// GitHub's anchor for a heading: lower case, punctuation dropped (letters, digits, '-', '_' and
// bytes of non-ASCII characters kept), spaces as '-'; a repeated anchor gets "-1", "-2", ...
std::set<std::string> anchors_of(const std::string& markdown) {
  std::set<std::string> anchors;
  std::map<std::string, int> seen;
  static const std::regex heading(R"(^#{1,6} +(.*?) *#* *$)");
  std::istringstream lines(without_fences(markdown));
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, heading)) continue;
    std::string slug;
    for (const char c : m[1].str()) {
      const auto u = static_cast<unsigned char>(c);
      if (u >= 0x80 || std::isalnum(u) || c == '-' || c == '_') slug += static_cast<char>(std::tolower(u));
      else if (c == ' ') slug += '-';
    }
    const int n = seen[slug]++;
    anchors.insert(n == 0 ? slug : slug + "-" + std::to_string(n));
  }
  return anchors;
}

struct Link {
  int line;
  std::string target;
};

// Every inline link and image target of the text, with the line its target is on.
std::vector<Link> links_of(const std::string& markdown) {
  const std::string prose = prose_of(markdown);
  static const std::regex link(R"(\]\(([^()\s]+)(?:\s+"[^"]*")?\))");
  std::vector<Link> links;
  for (auto it = std::sregex_iterator(prose.begin(), prose.end(), link); it != std::sregex_iterator(); ++it) {
    const auto at = static_cast<size_t>(it->position(0));
    const int line = 1 + static_cast<int>(std::count(prose.begin(), prose.begin() + static_cast<long>(at), '\n'));
    links.push_back({line, (*it)[1].str()});
  }
  return links;
}

// What is wrong with each relative link of `page` (a path under the source tree), one line each.
std::vector<std::string> broken_links(const fs::path& page) {
  std::vector<std::string> broken;
  const std::string text = read_file(page);
  for (const Link& link : links_of(text)) {
    const std::string& t = link.target;
    if (t.rfind("http://", 0) == 0 || t.rfind("https://", 0) == 0 || t.rfind("mailto:", 0) == 0) continue;
    const size_t hash = t.find('#');
    const std::string path = t.substr(0, hash), anchor = hash == std::string::npos ? "" : t.substr(hash + 1);
    const fs::path target = path.empty() ? page : page.parent_path() / path;
    const std::string where = fs::relative(page, kSource).string() + ":" + std::to_string(link.line) + ": ";
    if (!fs::exists(target)) {
      broken.push_back(where + t + ": no such file");
      continue;
    }
    if (!anchor.empty() && target.extension() == ".md" && !anchors_of(read_file(target)).count(anchor))
      broken.push_back(where + t + ": no heading with that anchor in " + target.filename().string());
  }
  return broken;
}

std::vector<fs::path> pages() {
  std::vector<fs::path> all{kSource / "README.md"};
  for (const auto& entry : fs::directory_iterator(kSource / "docs"))
    if (entry.path().extension() == ".md") all.push_back(entry.path());
  std::sort(all.begin(), all.end());
  return all;
}

TEST(Docs, EveryRelativeLinkReachesAFileAndHeading) {
  const std::vector<fs::path> all = pages();
  ASSERT_GT(all.size(), 10u) << "README.md and docs/*.md";
  size_t links = 0;
  std::vector<std::string> broken;
  for (const fs::path& page : all) {
    links += links_of(read_file(page)).size();
    for (const std::string& b : broken_links(page)) broken.push_back(b);
  }
  EXPECT_GT(links, 50u);  // the pages link to each other: a parser that finds none is broken
  for (const std::string& b : broken) ADD_FAILURE() << b;
}

TEST(Docs, ReadmeLinksEveryDocsPage) {
  const std::string readme = read_file(kSource / "README.md");
  for (const fs::path& page : pages()) {
    if (page.filename() == "README.md") continue;
    EXPECT_NE(readme.find("](docs/" + page.filename().string() + ")"), std::string::npos)
        << "README.md's \"Where to read more\" does not link docs/" << page.filename().string();
  }
}

TEST(Docs, ReadmeStaysShort) {
  const std::string readme = read_file(kSource / "README.md");
  const auto lines = static_cast<size_t>(std::count(readme.begin(), readme.end(), '\n'));
  EXPECT_GT(lines, 50u);
  EXPECT_LE(lines, kReadmeMaxLines) << "README.md is for a newcomer's five minutes: move reference "
                                       "material into docs/ and link it";
}

// The checker itself: it finds what is broken and passes what is not, on pages written here.
TEST(Docs, TheLinkCheckFindsMissingFilesAndAnchors) {
  const fs::path dir = mt::testing::fresh_temp_dir("docs_links");
  std::ofstream(dir / "b.md") << "# Title\n\n## The `shard` verb, again!\n\n## Twice\n\n## Twice\n";
  std::ofstream(dir / "a.md") << "[ok](b.md) [ok](b.md#the-shard-verb-again) [ok](b.md#twice-1)\n"
                                 "[ok](#local) [ok](https://example.com/x)\n"
                                 "`[code](missing.md)`\n```\n[fenced](missing.md)\n```\n"
                                 "## Local\n"
                                 "[bad](missing.md) [bad](b.md#nowhere)\n[across a\nline](b.md#twice-2)\n";
  const std::vector<std::string> broken = broken_links(dir / "a.md");
  ASSERT_EQ(broken.size(), 3u) << testing::PrintToString(broken);
  EXPECT_NE(broken[0].find(":8: missing.md: no such file"), std::string::npos) << broken[0];
  EXPECT_NE(broken[1].find(":8: b.md#nowhere: no heading"), std::string::npos) << broken[1];
  EXPECT_NE(broken[2].find(":10: b.md#twice-2: no heading"), std::string::npos) << broken[2];
}

}  // namespace
