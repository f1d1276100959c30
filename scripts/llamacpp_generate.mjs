// Greedy generation and tokenization with the real llama.cpp, through node-llama-cpp's prebuilt
// binaries (used by scripts/check_llamacpp.sh, which copies this file next to its node_modules).
//
//   node llamacpp_generate.mjs --model M.gguf [--lora A.gguf] [-n 60] [--text-out FILE]
//                              [--prompt-ids "1 403 407"] [--tokenize TEXT] [--tokenize-special TEXT]
//                              [--stop-id N] [--info]
//
// Generation starts from BOS alone, or from the ids of --prompt-ids (as meshtrain tokenized the
// prompt, so both programs start from the same tokens), temperature 0 (greedy), and stops after n
// tokens or at EOS. Prints "ids: ..." (the new tokens; and "tokens: ..." for --tokenize); the
// detokenized text (with a prompt: of the prompt and the new tokens) goes to --text-out (or to
// stdout as "text: ...").
// --tokenize-special parses special tokens written in the text (a chat template's markers) as the
// tokens they are, as a chat prompt is tokenized; --tokenize leaves them as text. --stop-id N ends
// generation at that id too (a chat template's end of turn).
import {writeFileSync} from "node:fs";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const args = process.argv.slice(2);
const opt = {n: 60};
for (let i = 0; i < args.length; ++i) {
  const a = args[i];
  if (a === "--model") opt.model = args[++i];
  else if (a === "--lora") opt.lora = args[++i];
  else if (a === "-n") opt.n = Number(args[++i]);
  else if (a === "--text-out") opt.textOut = args[++i];
  else if (a === "--tokenize") opt.tokenize = args[++i];
  else if (a === "--tokenize-special") opt.tokenizeSpecial = args[++i];
  else if (a === "--stop-id") opt.stopId = Number(args[++i]);
  else if (a === "--prompt-ids") opt.promptIds = args[++i].trim().split(/\s+/).filter((x) => x !== "").map(Number);
  else if (a === "--info") opt.info = true;
  else { console.error("llamacpp_generate: unknown argument " + a); process.exit(2); }
}

// CPU only, and never build or download anything: only the prebuilt binaries npm installed.
const llama = await getLlama({gpu: false, build: "never", skipDownload: true, usePrebuiltBinaries: true,
                              logLevel: LlamaLogLevel.error, progressLogs: false});
if (opt.info) {
  const r = llama.llamaCppRelease;
  console.log(`llama.cpp: ${r.repo} ${r.release} (${llama.buildType})`);
  console.log(`system: ${llama.systemInfo}`);
}
if (!opt.model) process.exit(opt.info ? 0 : 2);

const model = await llama.loadModel({modelPath: opt.model});
if (opt.tokenize !== undefined) console.log("tokens: " + model.tokenize(opt.tokenize).join(" "));
if (opt.tokenizeSpecial !== undefined) console.log("tokens: " + model.tokenize(opt.tokenizeSpecial, true).join(" "));
if (opt.n > 0) {
  const lora = opt.lora ? {lora: {adapters: [{filePath: opt.lora, scale: 1}]}} : {};
  const ctx = await model.createContext({contextSize: 256, batchSize: 256, threads: 1, ...lora});
  const seq = ctx.getSequence();
  const out = [];
  const start = opt.promptIds ?? [model.tokens.bos];
  for await (const t of seq.evaluate(start, {temperature: 0})) {
    out.push(t);
    if (out.length >= opt.n || t === model.tokens.eos || t === opt.stopId) break;
  }
  // A leading BOS is left out, as without a prompt: llama.cpp then drops the first piece's word-
  // marker space (sentencepiece), as meshtrain's decoder does.
  const shown = opt.promptIds ? opt.promptIds.filter((t, i) => i > 0 || t !== model.tokens.bos).concat(out) : out;
  const text = model.detokenize(shown);
  console.log("ids: " + out.join(" "));
  if (opt.textOut) writeFileSync(opt.textOut, text + "\n");
  else console.log("text: " + text);
  await ctx.dispose();
}
await model.dispose();
await llama.dispose();
