// Used by scripts/check_hf_tokenizer_json.sh: encodes every reference string with Hugging Face's
// tokenizers.js (@huggingface/tokenizers, the tokenizer of transformers.js) and with
// `meshtrain tokenize`, for each tokenizer.json given, and compares the ids (also with
// python3-sentencepiece's, where given).
//
//   node hf_tokenizer_check.mjs MESHTRAIN REFERENCE_IDS.json DIR[=REFERENCE_MODEL] ...
// DIR holds tokenizer.json and tokenizer_config.json; REFERENCE_MODEL names the entry of
// reference_ids.json its ids must also equal. Exits 1 on any mismatch.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { Tokenizer } from "@huggingface/tokenizers";

const [mt, refFile, ...dirs] = process.argv.slice(2);
const ref = JSON.parse(readFileSync(refFile, "utf8"));
let failures = 0;

for (const arg of dirs) {
  const [dir, refModel] = arg.split("=");
  const json = JSON.parse(readFileSync(`${dir}/tokenizer.json`, "utf8"));
  const config = JSON.parse(readFileSync(`${dir}/tokenizer_config.json`, "utf8"));
  const tok = new Tokenizer(json, config);
  // HF splits added tokens (<s>, </s>, <unk>) out of the text, as `meshtrain tokenize --specials`
  // does; sentencepiece never does, so strings holding one are not compared with it.
  const specials = (json.added_tokens || []).map((t) => t.content);
  let checked = 0, mismatches = 0, roundTrips = 0;
  ref.strings.forEach((s, i) => {
    const js = tok.encode(s, { add_special_tokens: false }).ids.map(Number);
    const ours = JSON.parse(execFileSync(mt, ["tokenize", "--specials", "--tokenizer", `${dir}/tokenizer.json`, "--text", s]));
    const plain = !specials.some((t) => s.includes(t));
    const want = refModel && plain ? ref.models[refModel].ids[i] : ours;
    checked++;
    if (JSON.stringify(js) !== JSON.stringify(ours) || JSON.stringify(js) !== JSON.stringify(want)) {
      mismatches++;
      if (mismatches <= 5)
        console.log(`  ${dir}: string ${i} ${JSON.stringify(s)}\n    tokenizers.js ${JSON.stringify(js)}\n    meshtrain     ${JSON.stringify(ours)}` +
                    (refModel ? `\n    sentencepiece ${JSON.stringify(want)}` : ""));
    }
    if ((js.length ? tok.decode(js, { skip_special_tokens: false }) : "") === s) roundTrips++;
  });
  console.log(`${mismatches ? "MISMATCH" : "ok"}: ${dir}${refModel ? ` (and sentencepiece ${refModel})` : ""}: ` +
              `${checked - mismatches}/${checked} strings encode alike; tokenizers.js decode gives the text back for ${roundTrips}`);
  failures += mismatches;
}
process.exit(failures ? 1 : 0);
