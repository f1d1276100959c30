// Renders conversations with real Jinja chat_templates using Hugging Face's Jinja implementation
// (@huggingface/jinja, the one transformers.js uses). Two uses:
//
//   node render_chat_templates.mjs RENDERINGS.json FAMILY=TOKENIZER_CONFIG.json ...
//     renders the conversations of tests/data/hf_families/chat_renderings.json with each family's
//     tokenizer_config.json and writes the texts back into that file; the tests check that
//     meshtrain's hand-written templates give the same token ids as tokenizing these texts.
//
//   node render_chat_templates.mjs --corpus tests/data/chat_templates/renderings.json [DIR]
//     renders the corpus of chat_template_corpus.mjs with every template that file lists (a
//     committed file, or for templates whose licence keeps them out of the project, DIR/<name>.jinja)
//     and writes the texts (or the template's error) back; tests/test_jinja_renderings.cpp checks
//     that meshtrain's Jinja interpreter writes the same. strftime_now() returns the file's fixed
//     date, so renderings do not depend on the day.
import { readFileSync, writeFileSync } from "node:fs";
import { Template } from "@huggingface/jinja";

import { dirname, join } from "node:path";

// @huggingface/jinja's strftime_now() reads `new Date()` in local time: fix both to the file's date.
function fixDate(epochSeconds) {
  process.env.TZ = "UTC";
  const fixed = epochSeconds * 1000;
  const RealDate = Date;
  globalThis.Date = class extends RealDate {
    constructor(...args) {
      super(...(args.length ? args : [fixed]));
    }
    static now() {
      return fixed;
    }
  };
}

function renderCorpus(file, dir) {
  const root = join(dirname(file), "../../..");  // the file is tests/data/chat_templates/renderings.json
  const doc = JSON.parse(readFileSync(file, "utf8"));
  fixDate(doc.strftime_now_epoch);
  return import("./chat_template_corpus.mjs").then((corpus) => {
    const cases = [];
    for (const [name, t] of Object.entries(doc.templates)) {
      let source;
      if (t.file) source = readFileSync(join(root, t.file), "utf8");
      else if (t.tokenizer_config) source = JSON.parse(readFileSync(join(root, t.tokenizer_config), "utf8")).chat_template;
      else if (dir) source = readFileSync(join(dir, name + ".jinja"), "utf8");
      else {
        cases.push(...doc.cases.filter((c) => c.template === name));  // kept as rendered before
        continue;
      }
      const template = new Template(source);
      const convs = [...corpus.basic, ...(t.tools ? corpus.tools : []), ...(t.thinking ? corpus.thinking : [])];
      for (const conv of convs) {
        const context = { bos_token: t.bos_token, eos_token: t.eos_token, ...conv };
        delete context.name;
        const c = { template: name, name: conv.name, context };
        try {
          c.rendered = template.render(context);
        } catch (e) {
          c.error = String(e.message || e);
        }
        cases.push(c);
      }
    }
    doc.cases = cases;
    writeFileSync(file, JSON.stringify(doc, null, 1) + "\n");
    console.log(`${file}: ${cases.length} cases rendered`);
  });
}

if (process.argv[2] === "--corpus") {
  await renderCorpus(process.argv[3], process.argv[4]);
  process.exit(0);
}

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
