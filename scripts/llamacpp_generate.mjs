// Greedy generation and tokenization with the real llama.cpp, through node-llama-cpp's prebuilt
// binaries (used by scripts/check_llamacpp.sh, which copies this file next to its node_modules).
//
//   node llamacpp_generate.mjs --model M.gguf [--lora A.gguf] [-n 60] [--text-out FILE]
//                              [--tokenize TEXT] [--info]
//
// Generation starts from BOS alone (no prompt), temperature 0 (greedy), and stops after n tokens
// or at EOS. Prints "ids: ..." (and "tokens: ..." for --tokenize); the detokenized text goes to
// --text-out (or to stdout as "text: ...").
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
if (opt.n > 0) {
  const lora = opt.lora ? {lora: {adapters: [{filePath: opt.lora, scale: 1}]}} : {};
  const ctx = await model.createContext({contextSize: 256, batchSize: 256, threads: 1, ...lora});
  const seq = ctx.getSequence();
  const out = [];
  for await (const t of seq.evaluate([model.tokens.bos], {temperature: 0})) {
    out.push(t);
    if (out.length >= opt.n || t === model.tokens.eos) break;
  }
  const text = model.detokenize(out);
  console.log("ids: " + out.join(" "));
  if (opt.textOut) writeFileSync(opt.textOut, text + "\n");
  else console.log("text: " + text);
  await ctx.dispose();
}
await model.dispose();
await llama.dispose();
