// The JavaScript port of the reference tokenizer on the same texts as
// bench/tokenize, for its "x node" column; bench/tokenize runs it when given
// --node-modules. Prints one JSON object:
//   {"<tokenizer>": {"<text>": {"mbps": .., "tokens": ..}}, ...}
// Usage: node bench/tokenize_node.mjs NODE_MODULES REPS TOKENIZER_DIR... -- TEXT_FILE...
// NODE_MODULES holds @lenml/tokenizers (docs/benchmarks.md gives the install
// command); each TOKENIZER_DIR holds tokenizer.json.zst and tokenizer_config.json.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { basename, join } from "node:path";

const [modules, repsArg, ...rest] = process.argv.slice(2);
const sep = rest.indexOf("--");
if (!modules || sep < 0) throw new Error("usage: tokenize_node.mjs NODE_MODULES REPS DIR... -- TEXT...");
const reps = Number(repsArg);
const dirs = rest.slice(0, sep);
const files = rest.slice(sep + 1);
const require = createRequire(join(modules, "x.js"));
const { TokenizerLoader } = require("@lenml/tokenizers");

const read = (path) => (path.endsWith(".zst") ? execFileSync("zstd", ["-dc", path], { maxBuffer: 1 << 30 }) : readFileSync(path));
const texts = files.map((f) => {
  const bytes = read(f);
  return { name: basename(f).replace(/\.zst$/, ""), bytes: bytes.length, text: new TextDecoder("utf-8").decode(bytes) };
});

const out = {};
for (const dir of dirs) {
  const tokenizerJSON = JSON.parse(read(join(dir, "tokenizer.json.zst")).toString("utf8"));
  const tokenizerConfig = JSON.parse(readFileSync(join(dir, "tokenizer_config.json"), "utf8"));
  const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });
  const row = {};
  for (const t of texts) {
    let tokens = 0;
    const seconds = [];
    for (let r = 0; r < reps; ++r) {
      const t0 = process.hrtime.bigint();
      tokens = tok.encode(t.text, { add_special_tokens: false }).length;
      seconds.push(Number(process.hrtime.bigint() - t0) / 1e9);
    }
    seconds.sort((a, b) => a - b);
    row[t.name] = { mbps: t.bytes / 1e6 / seconds[Math.floor(seconds.length / 2)], tokens };
  }
  out[basename(dir)] = row;
}
console.log(JSON.stringify(out));
