// Writes reference token ids from Hugging Face's tokenizers.js (@huggingface/tokenizers, the
// tokenizer of transformers.js) for a tokenizer.json and a list of strings, as tests commit them
// (tests/data/hf_families/*_reference_ids.json). Added tokens in the strings are matched as HF does.
//
//   node hf_reference_ids.mjs TOKENIZER_DIR STRINGS.json OUT.json [NOTE]
// TOKENIZER_DIR holds tokenizer.json (and tokenizer_config.json, optional); STRINGS.json is
// {"strings": [...]}. OUT.json gets {"source", "tokenizers_js", "strings", "ids", "decoded"}.
import { readFileSync, writeFileSync, existsSync } from "node:fs";
import { Tokenizer } from "@huggingface/tokenizers";

const [dir, stringsFile, outFile, note] = process.argv.slice(2);
const json = JSON.parse(readFileSync(`${dir}/tokenizer.json`, "utf8"));
const configPath = `${dir}/tokenizer_config.json`;
const config = existsSync(configPath) ? JSON.parse(readFileSync(configPath, "utf8")) : {};
const tok = new Tokenizer(json, config);
const { strings } = JSON.parse(readFileSync(stringsFile, "utf8"));
const version = JSON.parse(readFileSync("node_modules/@huggingface/tokenizers/package.json", "utf8")).version;
const ids = strings.map((s) => tok.encode(s, { add_special_tokens: false }).ids.map(Number));
const decoded = ids.map((t) => (t.length ? tok.decode(t, { skip_special_tokens: false }) : ""));
writeFileSync(outFile, JSON.stringify({ source: note || dir, tokenizers_js: version, strings, ids, decoded }, null, 1) + "\n");
console.log(`${outFile}: ${strings.length} strings`);
