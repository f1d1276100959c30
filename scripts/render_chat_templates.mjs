// Renders the conversations of tests/data/hf_families/chat_renderings.json with the real Jinja
// chat_template of each family's tokenizer_config.json, using Hugging Face's Jinja implementation
// (@huggingface/jinja, the one transformers.js uses), and writes the texts back into that file.
// The tests check that meshtrain's hand-written templates give the same token ids as tokenizing
// these texts.
//
//   node render_chat_templates.mjs RENDERINGS.json FAMILY=TOKENIZER_CONFIG.json ...
import { readFileSync, writeFileSync } from "node:fs";
import { Template } from "@huggingface/jinja";

const [file, ...configs] = process.argv.slice(2);
const doc = JSON.parse(readFileSync(file, "utf8"));
for (const arg of configs) {
  const [family, path] = arg.split("=");
  const config = JSON.parse(readFileSync(path, "utf8"));
  const template = new Template(config.chat_template);
  const str = (t) => (typeof t === "string" ? t : t && t.content) || "";
  for (const c of doc.cases.filter((c) => c.family === family)) {
    c.rendered = template.render({
      messages: c.messages,
      add_generation_prompt: c.add_generation_prompt,
      bos_token: str(config.bos_token),
      eos_token: str(config.eos_token),
    });
    c.template_source = c.template_source || path.split("/").slice(-3).join("/");
  }
}
writeFileSync(file, JSON.stringify(doc, null, 1) + "\n");
console.log(`${file}: rendered`);
