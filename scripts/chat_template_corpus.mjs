// The conversations every published chat template is rendered on (render_chat_templates.mjs
// --corpus): system prompts, multi-turn, empty content, unicode and padding, and, where the
// template takes them, tools, tool calls and results, and Qwen3's reasoning.
const unicode = "  Ünïcödé: 日本語のテキスト, emoji 🙂🚀, «guillemets», \"double\" 'single' \\ back\\slash\n\ttabbed  ";

export const basic = [
  { name: "user only, generation prompt", add_generation_prompt: true, messages: [{ role: "user", content: "Write a haiku about rain." }] },
  {
    name: "system, user, generation prompt",
    add_generation_prompt: true,
    messages: [
      { role: "system", content: "You are terse." },
      { role: "user", content: "Hi there" },
    ],
  },
  {
    name: "multi-turn with system",
    add_generation_prompt: false,
    messages: [
      { role: "system", content: "You are a careful assistant." },
      { role: "user", content: "What is 2+2?" },
      { role: "assistant", content: "4" },
      { role: "user", content: "And 3+3?" },
      { role: "assistant", content: "6, of course." },
    ],
  },
  {
    name: "multi-turn without system, generation prompt",
    add_generation_prompt: true,
    messages: [
      { role: "user", content: "Name a colour." },
      { role: "assistant", content: "Blue." },
      { role: "user", content: "Another one?" },
    ],
  },
  {
    name: "empty contents",
    add_generation_prompt: false,
    messages: [
      { role: "system", content: "" },
      { role: "user", content: "" },
      { role: "assistant", content: "" },
    ],
  },
  {
    name: "unicode and padding",
    add_generation_prompt: false,
    messages: [
      { role: "user", content: unicode },
      { role: "assistant", content: "\n  " + unicode + "\n\n" },
    ],
  },
  {
    name: "template-like text in the data",
    add_generation_prompt: false,
    messages: [
      { role: "user", content: "Print {{ bos_token }} and {% raw %} and <|im_start|> [INST] <start_of_turn>" },
      { role: "assistant", content: "{# not a comment #} <|eot_id|> </s> <end_of_turn>" },
    ],
  },
];

const weather = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Current weather in a city",
    parameters: {
      type: "object",
      properties: { city: { type: "string", description: "The city, e.g. Zürich" }, days: { type: "integer" } },
      required: ["city"],
    },
  },
};

// Tool use in the OpenAI / transformers shape: tools, an assistant's tool_calls, a tool result.
export const tools = [
  {
    name: "tools, generation prompt",
    add_generation_prompt: true,
    tools: [weather],
    messages: [
      { role: "system", content: "You help with travel." },
      { role: "user", content: "Weather in Zürich?" },
    ],
  },
  {
    name: "tool call and result",
    add_generation_prompt: true,
    tools: [weather],
    messages: [
      { role: "user", content: "Weather in Paris for 2 days?" },
      {
        role: "assistant",
        content: "",
        tool_calls: [{ id: "call12345", type: "function", function: { name: "get_weather", arguments: { city: "Paris", days: 2 } } }],
      },
      { role: "tool", tool_call_id: "call12345", content: "{\"temp\": 21, \"sky\": \"clear\"}" },
    ],
  },
  {
    // A training record of agent data (tests/test_chat_tool_use.cpp reads it from a JSONL file):
    // arguments whose keys are not in sorted order, the tool's name and call id, and
    // reasoning_content on both answers. (Qwen3's template needs a string content beside the call.)
    name: "tool use to train on",
    add_generation_prompt: false,
    tools: [weather],
    messages: [
      { role: "system", content: "You help with the weather." },
      { role: "user", content: "Weather in Bern tomorrow?" },
      {
        role: "assistant",
        content: "",
        reasoning_content: "The user wants tomorrow's weather in Bern: call the tool.",
        tool_calls: [{ id: "call98765", type: "function", function: { name: "get_weather", arguments: { days: 1, city: "Bern" } } }],
      },
      { role: "tool", tool_call_id: "call98765", name: "get_weather", content: "{\"temp\": 4, \"sky\": \"fog\"}" },
      { role: "assistant", content: "Foggy and 4 °C in Bern tomorrow.", reasoning_content: "The tool says fog and 4 degrees." },
    ],
  },
];

// Qwen3's reasoning: a <think> block in the content, reasoning_content, and enable_thinking.
export const thinking = [
  {
    name: "thinking in the last answer",
    add_generation_prompt: false,
    messages: [
      { role: "user", content: "Is 17 prime?" },
      { role: "assistant", content: "<think>\nCheck divisors up to 4.\n</think>\n\nYes, 17 is prime." },
    ],
  },
  {
    name: "reasoning_content, then a new question",
    add_generation_prompt: true,
    messages: [
      { role: "user", content: "Is 15 prime?" },
      { role: "assistant", content: "No: 3 × 5.", reasoning_content: "15 = 3 * 5" },
      { role: "user", content: "And 13?" },
    ],
  },
  {
    name: "thinking turned off",
    add_generation_prompt: true,
    enable_thinking: false,
    messages: [{ role: "user", content: "Quick: capital of France?" }],
  },
  {
    name: "multi-step tool call with thinking",
    add_generation_prompt: false,
    tools: [weather],
    messages: [
      { role: "user", content: "Weather in Oslo?" },
      {
        role: "assistant",
        content: "<think>\nI should call the tool.\n</think>\n\nLet me check.",
        tool_calls: [{ type: "function", function: { name: "get_weather", arguments: "{\"city\": \"Oslo\"}" } }],
      },
      { role: "tool", content: "<tool_response>-3 and snowing</tool_response>" },
      { role: "assistant", content: "It is -3 °C and snowing in Oslo." },
    ],
  },
];
