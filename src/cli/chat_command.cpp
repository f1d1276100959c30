// meshtrain chat --model DIR [--adapter DIR]: a conversation in the terminal. Each line read from
// stdin is a user turn, a line ending in a backslash going on with the next one (a pipe works as
// well as a terminal); the whole conversation is rendered
// with the chat template again each turn, as HF's apply_chat_template does, and the answer is
// streamed until the template's end of turn or another stop id.
#include <unistd.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/generation_args.h"

namespace mt::cli {

namespace {

constexpr const char* kChatCommands = "/reset forgets the conversation, /system TEXT sets the system message "
                                   "(/system alone removes it), /exit ends (as does end of input); a line ending in \\ goes on "
                                   "with the next";

// The conversation: the system message (when there is one) and the turns since the last /reset.
struct ChatConversation {
  std::string system;
  bool has_system = false;
  std::vector<ChatMessage> turns;

  std::vector<ChatMessage> messages() const {
    std::vector<ChatMessage> m;
    if (has_system) m.push_back({"system", system});
    m.insert(m.end(), turns.begin(), turns.end());
    return m;
  }
};

// One line of input without its line end (a Windows file's '\r' too); false at the end of input.
bool read_line(std::string& line) {
  if (!std::getline(std::cin, line)) return false;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return true;
}

// A user message: lines ending in a backslash go on with the next line, the backslash becoming
// the line break (a message ends where a line does not; or at the end of input).
void read_continuations(std::string& message, bool terminal) {
  while (!message.empty() && message.back() == '\\') {
    message.back() = '\n';
    if (terminal) std::cout << ". " << std::flush;
    std::string more;
    if (!read_line(more)) {
      message.pop_back();  // the input ended mid-message: the lines so far are the message
      return;
    }
    message += more;
  }
}

// Handles a line starting with '/'; false for /exit.
bool chat_command(const std::string& line, ChatConversation& c) {
  const std::string name = line.substr(0, line.find(' '));
  const std::string rest = name.size() < line.size() ? line.substr(name.size() + 1) : "";
  if (name == "/exit" || name == "/quit") return false;
  if (name == "/reset") {
    c.turns.clear();
    std::cerr << "chat: conversation reset" << (c.has_system ? " (the system message stays)" : "") << "\n";
  } else if (name == "/system") {
    c.system = rest;
    c.has_system = !rest.empty();
    std::cerr << "chat: " << (c.has_system ? "system message set" : "system message removed") << "\n";
  } else {
    std::cerr << "chat: unknown command " << name << " (" << kChatCommands << ")\n";
  }
  return true;
}

}  // namespace

Action add_chat_command(CLI::App& app) {
  auto o = std::make_shared<GenerationArgs>();
  auto* sub = app.add_subcommand(
      "chat",
      "Talk with a chat model: each line of stdin is a user turn (a line ending in \\ goes on with the next), "
      "the history is kept");
  o->add_to(sub);
  return [o] {
    Generator g = load_generator(*o, "chat", "auto", true);
    ChatConversation c{o->system, o->has_system(), {}};
    const bool terminal = isatty(STDIN_FILENO);
    std::cerr << "chat: " << g.format << " template, context " << g.context() << " tokens; " << kChatCommands << "\n";
    std::string line;
    while (true) {
      if (terminal) std::cout << "> " << std::flush;
      if (!read_line(line)) break;
      if (line.empty()) continue;
      if (line[0] == '/') {
        if (!chat_command(line, c)) break;
        continue;
      }
      read_continuations(line, terminal);
      c.turns.push_back({"user", line});
      const std::vector<int32_t> prompt = g.conversation_prompt(c.messages());
      // The answer needs room for at least one token: a conversation past that is refused, and the
      // turn left out of the history so that the user can go on after /reset or /system.
      if (int64_t(prompt.size()) >= g.context()) {
        c.turns.pop_back();
        std::cerr << "chat: the conversation is now " << prompt.size() << " tokens, and the model's context holds "
                  << g.context() << " (answer included): /reset to start a new one, or /exit" << std::endl;
        continue;
      }
      if (o->verbose)
        std::cerr << "chat: prompt of " << prompt.size() << " tokens: " << g.tok->decode(prompt) << "\n"
                  << "chat: prompt ids " << ids_text(prompt) << "\n";
      const Generated r = stream_generation(g, prompt, std::cout, false);
      std::cout << std::endl;
      c.turns.push_back({"assistant", g.tok->decode(r.tokens)});
      if (o->verbose) std::cerr << "chat: " << stop_reason(g, r, prompt.size()) << "\n";
      if (r.stop_id < 0 && int64_t(prompt.size() + r.tokens.size()) >= g.context())
        std::cerr << "chat: the answer reached the end of the model's context (" << g.context()
                  << " tokens): /reset to start a new conversation" << std::endl;
    }
    return 0;
  };
}

}  // namespace mt::cli
