// libFuzzer target: the whole meshtrain command line (cli/cli_app.h run_cli), in-process, each
// command run up to the point where its work would start (core/work_gate.h). Built by
// scripts/fuzz.sh: this file and src/cli/ with clang++ (libFuzzer, ASan, UBSan), linked against the
// g++ build's libmeshtrain_lib.a, so the library's code is exercised but not coverage-guided.
//
// The input is read as choices (FuzzedDataProvider): a verb, then up to 14 arguments, each an
// option of that verb (as CLI11 declares it), a value from a list of hostile and ordinary ones
// (counts at every integer edge, non-finite floats, meshes, the config keys' allowed strings,
// the fixture files' names, a small model directory among them), a `--set` of a config key (from the config schema) to such a value,
// or fuzzed bytes. Paths cannot leave the scratch directory: fuzzed bytes have their '/' replaced
// and the fixtures are relative, and the scratch directory sits two levels inside this process's
// own (a fuzzed ".." stays inside it).
//
// The oracle, for every command line: the exit code is below 128 (no signal: libFuzzer itself
// catches crashes, -timeout hangs, -malloc_limit_mb an allocation of what a count claimed), a
// failure prints exactly one "meshtrain: error" line, as the last line of its error output and at
// most kMaxErrorLine bytes long, and a success prints none.
#include <fuzzer/FuzzedDataProvider.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/cli_app.h"
#include "core/work_gate.h"
#include "fuzz_support.h"
#include "io/model_files.h"
#include "model/presets.h"
#include "model/transformer.h"
#include "train/config_schema.h"
#include "train/run_config.h"

namespace {

constexpr size_t kMaxErrorLine = 2000;  // a message quotes at most 200 characters of any one value

// Each verb's name and options as CLI11 declares them, from the verbs run_cli registers.
struct Verb {
  std::string name;
  std::vector<std::string> options;
};

std::vector<Verb> verbs() {
  CLI::App app;
  std::vector<Verb> out;
  for (const auto& [sub, action] : mt::cli::add_verbs(app)) {
    Verb v{sub->get_name(), {"--help"}};
    for (const CLI::Option* o : sub->get_options()) {
      for (const std::string& l : o->get_lnames()) v.options.push_back("--" + l);
      for (const std::string& s : o->get_snames()) v.options.push_back("-" + s);
    }
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<std::string> config_key_names() {
  std::vector<std::string> keys;
  for (const mt::ConfigKey& k : mt::config_keys()) keys.emplace_back(k.name);
  return keys;
}

// Values a user might give, hostile and ordinary: every key's allowed strings are added at start.
std::vector<std::string> values() {
  std::vector<std::string> v = {
      "0", "1", "2", "3", "4", "7", "8", "16", "64", "100", "1000", "4096", "30000", "65536", "-1", "-2",
      "2147483647", "2147483648", "4294967296", "4294967297", "1099511627776", "9223372036854775807",
      "9223372036854775808", "18446744073709551615", "18446744073709551616", "-9223372036854775808",
      "1e308", "1e309", "-1e308", "1e-320", "inf", "-inf", "nan", "0.0", "0.5", "1e-4", "3e38", "",
      " ", "auto", "true", "false", "yes", "[]", "{}", "x=1", "=", "a.b=c", "\xff\xfe", "\xc3\x28",
      "dp=2", "fsdp=2", "tp=2", "pp=2", "cp=2", "ep=2", "dp=1,fsdp=1,tp=1,pp=1,cp=1,ep=1",
      "dp=4294967296,fsdp=4294967296", "dp=0", "tp=3,pp=2", "fsdp=16777217", "dp=-1", "tp=2,tp=2",
      "data.jsonl", "text.txt", "run.toml", "ids.txt", "model", "model/config.json", "missing", "out", "..", ".", "run",
      "org/model",  // a Hugging Face Hub id: refused from the empty, offline cache
      "mi300x-node", "frontier", "dgx-h100", "dgx-h200", "cpu", "cuda", "byte", "gemm", "full", "lora",
      "all", "p2p", "1,2,3", "0,-1", "99999999999", std::string(5000, 'a'), std::string(300, '9')};
  for (const mt::ConfigKey& k : mt::config_keys())
    for (std::string_view c : k.choices) v.emplace_back(c);
  for (const std::string& p : mt::llama_preset_names()) v.push_back(p);
  return v;
}

// The scratch directory's files: small, ordinary inputs for the verbs to get past "no such file".
void write_fixtures(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path d = fs::path(dir) / "a" / "b";
  fs::create_directories(d);
  std::ofstream(d / "data.jsonl") << "{\"instruction\": \"Name a colour.\", \"output\": \"Blue.\"}\n"
                                  << "{\"instruction\": \"Count to two.\", \"output\": \"One, two.\"}\n";
  std::ofstream(d / "text.txt") << "Once upon a time there was a baker.\nShe baked bread.\n";
  std::ofstream(d / "ids.txt") << "72 101 108 108 111\n1 2 3\n";
  std::ofstream(d / "run.toml") << mt::default_run_config_toml();
  // A model directory of the built-in run's shape (random weights, no tokenizer: --tokenizer byte),
  // so that the verbs taking --model get to their checks of it.
  const mt::RunConfig run = mt::parse_run_config(mt::default_run_config_toml(), {}, "built-in");
  mt::Transformer model(run.model, mt::Precision::fp32, mt::LoraConfig{});
  model.init_weights(1);
  mt::save_base_model(model, (d / "model").string());
}

std::string fuzzed_bytes(FuzzedDataProvider& in) {
  std::string s = in.ConsumeRandomLengthString(64);
  for (char& c : s)
    if (c == '/' || c == '\0') c = '_';  // never a path out of the scratch directory; argv has no NUL
  return s;
}

struct Tables {
  std::vector<Verb> verbs = ::verbs();
  std::vector<std::string> keys = config_key_names();
  std::vector<std::string> values = ::values();
};

template <class T>
const T& pick(FuzzedDataProvider& in, const std::vector<T>& from) {
  return from[in.ConsumeIntegralInRange<size_t>(0, from.size() - 1)];
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // What a command would otherwise wait for: --mesh auto samples the host's load over a second,
  // and verbs that read their input from stdin would wait for a terminal.
  setenv("MESHTRAIN_HOST_LOAD", "0", 1);
  setenv("OMP_NUM_THREADS", "1", 1);
  if (!std::freopen("/dev/null", "r", stdin)) std::abort();
  const std::string& dir = fuzz::scratch_dir("fuzz_cli", write_fixtures);
  // A Hub id (--model ORG/NAME) never reaches the network: it is looked for in an empty cache of
  // the scratch directory's, offline, and refused.
  setenv("HF_HUB_OFFLINE", "1", 1);
  setenv("HF_HUB_CACHE", (dir + "/hf_cache").c_str(), 1);
  std::filesystem::current_path(std::filesystem::path(dir) / "a" / "b");
  mt::work_gate::close();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Tables tables;
  FuzzedDataProvider in(data, size);
  std::vector<std::string> args = {"meshtrain"};
  const size_t verb = in.ConsumeIntegralInRange<size_t>(0, tables.verbs.size());  // the last: no verb
  if (verb < tables.verbs.size()) args.push_back(tables.verbs[verb].name);
  const size_t count = in.ConsumeIntegralInRange<size_t>(0, 14);
  for (size_t i = 0; i < count && in.remaining_bytes() > 0; ++i) {
    switch (in.ConsumeIntegralInRange<int>(0, 4)) {
      case 0:
      case 1:
        if (verb < tables.verbs.size()) args.push_back(pick(in, tables.verbs[verb].options));
        break;
      case 2: args.push_back(pick(in, tables.values)); break;
      case 3:
        args.push_back("--set");
        args.push_back(pick(in, tables.keys) + "=" + pick(in, tables.values));
        break;
      default: args.push_back(fuzzed_bytes(in)); break;
    }
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  // The command's output into strings (its error stream is the oracle's), libFuzzer's own reports
  // still on the real stderr.
  std::ostringstream out, err;
  std::streambuf* cout_buf = std::cout.rdbuf(out.rdbuf());
  std::streambuf* cerr_buf = std::cerr.rdbuf(err.rdbuf());
  int code = 0;
  bool stopped = false;
  try {
    code = mt::cli::run_cli(int(argv.size()) - 1, argv.data());
  } catch (const mt::work_gate::Stopped&) {
    stopped = true;
  }
  std::cout.rdbuf(cout_buf);
  std::cerr.rdbuf(cerr_buf);

  // FUZZ_CLI_VERBOSE=1 fuzz_cli <corpus files>: what each input ran and how it ended.
  static const bool verbose = std::getenv("FUZZ_CLI_VERBOSE") != nullptr;
  if (verbose) {
    for (const std::string& a : args) std::fprintf(stderr, "'%s' ", a.c_str());
    std::fprintf(stderr, "-> %s\n", stopped ? "stopped before its work" : ("exit " + std::to_string(code)).c_str());
  }
  fuzz::require(code >= 0 && code < 128);
  std::vector<std::string> lines;
  std::istringstream text(err.str());
  for (std::string line; std::getline(text, line);) lines.push_back(line);
  size_t errors = 0;
  for (const std::string& l : lines) errors += l.rfind("meshtrain: error", 0) == 0;
  if (stopped || code == 0) {
    fuzz::require(errors == 0);
  } else {
    if (errors != 1 || lines.back().rfind("meshtrain: error", 0) != 0 || lines.back().size() > kMaxErrorLine) {
      std::fprintf(stderr, "fuzz_cli: exit %d, %zu error lines; command line:", code, errors);
      for (const std::string& a : args) std::fprintf(stderr, " '%s'", a.c_str());
      std::fprintf(stderr, "\nits error output:\n%s\n", err.str().c_str());
      __builtin_trap();
    }
  }
  return 0;
}
