// Help that answers: every verb's --help shows each option's default (derived from the help
// itself: every option that takes a value must say its default or that it is required), and
// `train --help` names the config sections and where the key table is.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "run_command.h"

namespace {

using mt::testing::run_meshtrain;

// The verbs `meshtrain --help` lists under "Subcommands:".
std::vector<std::string> verbs() {
  const auto r = run_meshtrain("--help");
  EXPECT_EQ(r.code, 0) << r.output;
  std::vector<std::string> out;
  std::istringstream in(r.output);
  bool listing = false;
  const std::regex verb_line(R"(^  ([a-z][a-z-]*)\s.*)");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Subcommands:", 0) == 0) listing = true;
    else if (std::smatch m; listing && std::regex_match(line, m, verb_line)) out.push_back(m[1]);
  }
  return out;
}

struct HelpOption {
  std::string name;  // as printed, e.g. "-m,--model"
  bool takes_value = false;
  std::string text;  // the whole entry, continuation lines included
};

// The option entries of one help text. An entry starts "  -NAME"; one that takes a value has its
// type (INT, TEXT, FLOAT, ...) after a single space; a flag has its description after padding.
std::vector<HelpOption> options_of(const std::string& help) {
  std::vector<HelpOption> out;
  std::istringstream in(help);
  const std::regex start(R"(^  (-[^ ]+)( [A-Z])?.*)");
  bool open = false;
  for (std::string line; std::getline(in, line);) {
    if (std::smatch m; std::regex_match(line, m, start)) {
      out.push_back({m[1], m[2].matched, line});
      open = true;
    } else if (open && line.rfind("   ", 0) == 0) {
      out.back().text += " " + line;  // a description CLI11 put on the next line
    } else {
      open = false;
    }
  }
  return out;
}

TEST(CliHelp, EveryOptionShowsItsDefault) {
  const std::vector<std::string> listed = verbs();
  for (const char* expected : {"train", "eval", "generate", "chat", "export", "export-checkpoint", "shard", "plan",
                               "tokenize", "convert", "bench", "report"})
    EXPECT_NE(std::find(listed.begin(), listed.end(), expected), listed.end()) << expected;
  for (const std::string& verb : listed) {
    const auto r = run_meshtrain(verb + " --help");
    ASSERT_EQ(r.code, 0) << verb << "\n" << r.output;
    const std::vector<HelpOption> opts = options_of(r.output);
    EXPECT_TRUE(std::any_of(opts.begin(), opts.end(), [](const HelpOption& o) { return o.takes_value; }))
        << verb << ": no option that takes a value found in\n" << r.output;
    for (const HelpOption& o : opts) {
      if (!o.takes_value) continue;
      EXPECT_TRUE(o.text.find("(default: ") != std::string::npos || o.text.find("REQUIRED") != std::string::npos)
          << verb << " " << o.name << " does not show its default:\n" << o.text;
      // The default is in the description, not glued to the type as CLI11's TYPE=VALUE.
      EXPECT_FALSE(std::regex_search(o.text, std::regex(R"([A-Z\]}]=)"))) << o.text;
    }
  }
}

// The defaults are the values the options really have, not text written next to them.
TEST(CliHelp, DefaultsAreTheOptionsValues) {
  const auto eval = run_meshtrain("eval --help").output;
  EXPECT_NE(eval.find("tokens per window"), std::string::npos) << eval;
  EXPECT_TRUE(std::regex_search(eval, std::regex(R"(--seq-len INT[^\n]*\(default: 256\))"))) << eval;
  const auto plan = run_meshtrain("plan --help").output;
  EXPECT_TRUE(std::regex_search(plan, std::regex(R"(--model TEXT[^\n]*\(default: llama3-8b\))"))) << plan;
  const auto gen = run_meshtrain("generate --help").output;
  EXPECT_TRUE(std::regex_search(gen, std::regex(R"(--precision TEXT:\{fp32,bf16\}\s+fp32 or bf16 \(default: fp32\))"))) << gen;
}

TEST(CliHelp, TrainHelpNamesTheSectionsAndTheKeyTable) {
  const auto r = run_meshtrain("train --help");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("Config sections"), std::string::npos) << r.output;
  for (const char* section : {"[model]", "[lora]", "[optim]", "[train]", "[data]", "[output]", "[mesh]", "[partition]"})
    EXPECT_NE(r.output.find(section), std::string::npos) << section << "\n" << r.output;
  EXPECT_NE(r.output.find("docs/configuration.md"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("meshtrain train --print-config-table"), std::string::npos) << r.output;
}

}  // namespace
