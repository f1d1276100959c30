// Renders the conversations of tests/data/builtin_chat_templates.json with the Jinja chat_template
// meshtrain writes for each built-in template (the file's "templates"), using Hugging Face's Jinja
// implementation (@huggingface/jinja, the one transformers.js uses), and writes the texts back
// into the file. tests/test_chat_template_jinja.cpp checks that meshtrain's own rendering of each
// conversation tokenizes to the same ids, and that the templates are the ones meshtrain writes.
//
//   node render_builtin_chat_templates.mjs tests/data/builtin_chat_templates.json
import { readFileSync, writeFileSync } from "node:fs";
import { Template } from "@huggingface/jinja";

const file = process.argv[2];
const doc = JSON.parse(readFileSync(file, "utf8"));
for (const c of doc.cases) {
  c.rendered = new Template(doc.templates[c.format]).render({
    messages: c.messages,
    add_generation_prompt: c.add_generation_prompt,
  });
}
writeFileSync(file, JSON.stringify(doc, null, 1) + "\n");
console.log(`${file}: rendered`);
