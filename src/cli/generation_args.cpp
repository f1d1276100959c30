#include "cli/generation_args.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <limits>
#include <sstream>

#include "cli/count_check.h"
#include "cli/model_tokenizer.h"
#include "core/bounded_json.h"
#include "core/error.h"
#include "core/work_gate.h"
#include "io/adapter_template.h"

namespace mt::cli {

namespace {

namespace fs = std::filesystem;

// The directory a model's (or tokenizer's) HF side files would lie in: the directory itself, or
// the one holding the file; "" for what has none (a GGUF file, the byte tokenizer).
fs::path side_file_dir(const std::string& path) {
  if (path.empty() || path == "byte" || is_gguf_path(path)) return {};
  return fs::is_directory(path) ? fs::path(path) : fs::path(path).parent_path();
}

// generation_config.json's eos_token_id: one id or a list of them (Llama 3.1 Instruct lists
// <|end_of_text|>, <|eom_id|> and <|eot_id|>), the ids transformers' generate() stops at.
void add_generation_config_stops(const fs::path& dir, std::vector<StopToken>& stops) {
  const fs::path file = dir / "generation_config.json";
  if (dir.empty() || !fs::is_regular_file(file)) return;
  const nlohmann::json doc = read_json_file(file.string(), JsonKind::hf_config);
  if (!doc.is_object() || !doc.contains("eos_token_id") || doc["eos_token_id"].is_null()) return;
  const nlohmann::json& v = doc["eos_token_id"];
  const nlohmann::json list = v.is_array() ? v : nlohmann::json::array({v});
  for (const auto& id : list) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > std::numeric_limits<int32_t>::max())
      fail(file.string() + ": eos_token_id must be a token id or a list of them (got " + v.dump() + ")");
    stops.push_back({int32_t(id.get<int64_t>()), "eos_token_id of " + file.string()});
  }
}

// tokenizer_config.json's eos_token ("<|im_end|>" for Qwen's instruct models, whose tokenizer.json
// alone does not say which added token ends a text): a string or an AddedToken object.
void add_tokenizer_config_stop(const fs::path& dir, const Tokenizer& tok, std::vector<StopToken>& stops) {
  const fs::path file = dir / "tokenizer_config.json";
  if (dir.empty() || !fs::is_regular_file(file)) return;
  const nlohmann::json doc = read_json_file(file.string(), JsonKind::tokenizer);
  if (!doc.is_object() || !doc.contains("eos_token")) return;
  const nlohmann::json& v = doc["eos_token"];
  std::string text;
  if (v.is_string()) text = v.get<std::string>();
  else if (v.is_object() && v.contains("content") && v["content"].is_string()) text = v["content"].get<std::string>();
  const int32_t id = text.empty() ? -1 : tok.token_to_id(text);
  if (id >= 0) stops.push_back({id, "eos_token of " + file.string()});
}

void add_stop(std::vector<StopToken>& stops, int32_t id, std::string why) {
  if (id >= 0) stops.push_back({id, std::move(why)});
}

}  // namespace

void GenerationArgs::add_to(CLI::App* sub) {
  model.add_to(sub);
  device.add_to(sub, "cpu");
  sub->add_option("--template", format,
                  "wrap the prompt as the model was fine-tuned: none, alpaca (an instruction), or a user "
                  "message in a chat template: chat (Llama 3.1), chatml (Qwen), gemma, mistral, or auto "
                  "(the one the tokenizer's tokenizer_config.json or special tokens name) (default: the "
                  "template recorded in the --adapter directory's meshtrain_template.json, else " +
                      std::string(sub->get_name() == "chat" ? "auto" : "none") + ")")
      ->check(CLI::IsMember({"none", "alpaca", "chat", "chatml", "gemma", "mistral", "auto"}));
  system_option = sub->add_option("--system", system,
                  "a system message before the user's (chat templates only; gemma puts it at the start of the "
                  "first user message and mistral before the last one, as their own templates do) (default: none)");
  sub->add_option("--max-new-tokens,-n", gen.max_new_tokens,
                  "most tokens to generate for an answer; generation also ends at an end token (EOS, the "
                  "template's end of turn, generation_config.json's eos_token_id) or where the model's context is full")
      ->check(count_in(0));
  sub->add_option("--temperature,-t", gen.temperature, "0: greedy")->check(CLI::NonNegativeNumber);
  sub->add_option("--top-p", gen.top_p, "nucleus sampling mass")->check(CLI::Range(0.0, 1.0));
  sub->add_option("--seed", gen.seed, "sampling seed");
  sub->add_flag("--verbose,-v", verbose,
                "say on stderr the template, the stop ids, each prompt's tokens and why generation stopped "
                "(default: off)");
}

int64_t Generator::context() const { return model->config().max_position_embeddings; }

std::vector<int32_t> Generator::conversation_prompt(const std::vector<ChatMessage>& messages) const {
  return mt::conversation_prompt(*tok, messages, parse_format(format));
}

Generator load_generator(const GenerationArgs& args, const char* verb, const std::string& default_format,
                         bool needs_chat) {
  validate_sampling(args.gen);  // before loading the model: a bad option should cost nothing
  const std::string v = verb;
  // Said before any work when the template is given: --system has nowhere to go without a chat template.
  if (args.has_system() && (args.format == "none" || args.format == "alpaca"))
    fail(v + ": --system needs a chat template; the " + args.format +
         " template has no system message (--template chat, chatml, gemma, mistral or auto)");
  if (needs_chat && (args.format == "none" || args.format == "alpaca"))
    fail(v + ": needs a chat template (chat, chatml, gemma, mistral or auto), not " + args.format);
  Generator g{args.device.open(), nullptr, nullptr, "", {}, args.gen};
  work_gate::reached(verb);
  g.model = args.model.load_model(*g.backend);
  g.tok = args.model.load_tokenizer();
  std::string format = args.format;
  if (format.empty() && !args.model.adapter.empty()) {
    format = read_adapter_template(args.model.adapter);
    // Said once, so that a wrapped prompt is no surprise and the way to turn it off is at hand.
    if (!format.empty() && format != "none")
      std::cerr << v << ": using the adapter's " << format << " prompt template (--template none for the prompt as given)\n";
  }
  if (format.empty()) format = default_format;
  if (format == "auto") format = format_name(default_chat_format(*g.tok));
  g.format = format;
  if (!g.chat() && (args.has_system() || needs_chat))
    fail(v + ": " + (needs_chat ? std::string("needs a chat template") : std::string("--system needs a chat template")) +
         ", and " +
         (args.model.adapter.empty() ? "without --template the prompt is plain text"
                                     : "the adapter " + args.model.adapter + " was trained with " + format) +
         " (give --template chat, chatml, gemma, mistral or auto)");
  // An adapter trained with the user's own template (data.chat_template) carries its text, since
  // it carries no tokenizer: the prompt is rendered with it, as the training conversations were.
  if (g.chat() && !args.model.adapter.empty() && format == read_adapter_template(args.model.adapter))
    if (std::string jinja = read_adapter_chat_template(args.model.adapter); !jinja.empty()) {
      g.tok->set_chat_template(std::move(jinja));
      std::cerr << v << ": rendering with the chat_template the adapter was trained with (its data.chat_template)\n";
    }
  // A template whose special tokens the tokenizer lacks is refused before anything is generated.
  if (g.chat()) require_chat_tokens(*g.tok, parse_format(format));
  // What the tokenizer's own template writes that the built-in rendering leaves out, said once.
  if (format != "none")
    if (const auto warning = chat_template_warning(*g.tok, parse_format(format))) std::cerr << *warning << "\n";
  if (args.has_system() && (format == "gemma" || format == "mistral"))
    std::cerr << v << ": the " << format << " template has no system turn: --system goes "
              << (format == "gemma" ? "at the start of the first user message" : "before the last user message")
              << ", as " << (format == "gemma" ? "Gemma's" : "Mistral's") << " own template puts it\n";
  // End of text: EOS, and BOS (a model trained on concatenated documents starts a new one), the end
  // of an assistant turn in the chat template, and the ids the model's own files name.
  std::vector<StopToken>& stops = g.stops;
  add_stop(stops, g.tok->eos_id(), "the tokenizer's EOS");
  add_stop(stops, g.tok->bos_id(), "the tokenizer's BOS: a new text");
  add_stop(stops, g.tok->token_to_id("<|eot_id|>"), "Llama 3's end of turn");
  if (g.chat()) add_stop(stops, end_of_turn_id(*g.tok, parse_format(format)), "the " + format + " template's end of turn");
  // path(): a Hub id's snapshot, where its generation_config.json and tokenizer_config.json are.
  add_generation_config_stops(side_file_dir(args.model.path()), stops);
  add_tokenizer_config_stop(side_file_dir(args.model.tokenizer.empty() ? args.model.path() : args.model.tokenizer),
                            *g.tok, stops);
  for (const StopToken& s : stops)
    if (std::find(g.gen.stop_ids.begin(), g.gen.stop_ids.end(), s.id) == g.gen.stop_ids.end())
      g.gen.stop_ids.push_back(s.id);
  if (args.verbose) {
    std::cerr << v << ": template " << format << "; stop ids:";
    for (const StopToken& s : stops) std::cerr << " " << s.id << " (" << s.why << ")";
    std::cerr << "\n";
  }
  return g;
}

Generated stream_generation(Generator& g, const std::vector<int32_t>& prompt, std::ostream& out, bool echo_prompt) {
  std::vector<int32_t> shown = echo_prompt ? prompt : std::vector<int32_t>{};
  std::string printed = g.tok->decode(shown);
  out << printed << std::flush;
  Generated r;
  r.tokens = generate(*g.model, prompt, g.gen, [&](int32_t id) {
    shown.push_back(id);
    std::string text = g.tok->decode(shown);
    if (text.size() > printed.size() && text.compare(0, printed.size(), printed) == 0) {
      out << text.substr(printed.size()) << std::flush;
      printed = std::move(text);
    }
  }, &r.stop_id);
  return r;
}

std::string stop_reason(const Generator& g, const Generated& r, size_t prompt_tokens) {
  if (r.stop_id >= 0) {
    std::string why;
    for (const StopToken& s : g.stops)
      if (s.id == r.stop_id) why += (why.empty() ? "" : "; ") + s.why;
    return "stopped at id " + std::to_string(r.stop_id) + " " + nlohmann::json(g.tok->decode({r.stop_id})).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
           " (" + why + ")";
  }
  if (int64_t(prompt_tokens + r.tokens.size()) >= g.context())
    return "stopped at the end of the model's context (" + std::to_string(g.context()) + " tokens)";
  return "stopped after -n " + std::to_string(g.gen.max_new_tokens) + " tokens";
}

std::string ids_text(const std::vector<int32_t>& ids) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < ids.size(); ++i) s << (i ? ", " : "") << ids[i];
  s << "]";
  return s.str();
}

}  // namespace mt::cli
