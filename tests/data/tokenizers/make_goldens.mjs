// Regenerates tests/data/tokenizers/<name>/goldens.json.zst: the ids the
// JavaScript port of the reference tokenizer gives for the test texts.
// Never run by the build; needs node (>= 18), npm and zstd:
//   mkdir /tmp/tok && cd /tmp/tok && npm install @lenml/tokenizers@3.7.2
//   TOKENIZERS_NODE_MODULES=/tmp/tok/node_modules node tests/data/tokenizers/make_goldens.mjs
// (run from the repository root). The tokenizer files read are the vendored
// ones next to this script, so the goldens always match them.
//
// Texts: edge.txt (whole) and, for each data/corpus/*.txt.zst, the bytes up to
// the last '\n' within the first PREFIX_BYTES. Bytes that are not UTF-8 are
// replaced by U+FFFD per maximal subpart (the WHATWG decoder), as the C++
// tokenizer does before encoding.
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync, readdirSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

const PREFIX_BYTES = 8192;
const modules = process.env.TOKENIZERS_NODE_MODULES;
if (!modules) throw new Error("set TOKENIZERS_NODE_MODULES to the node_modules holding @lenml/tokenizers");
const require = createRequire(join(modules, "x.js"));
const { TokenizerLoader } = require("@lenml/tokenizers");

const here = "tests/data/tokenizers";
const zstdRead = (path) => execFileSync("zstd", ["-dc", path], { maxBuffer: 1 << 30 });

const texts = [{ name: "edge", file: join(here, "edge.txt"), bytes: readFileSync(join(here, "edge.txt")) }];
for (const f of readdirSync("data/corpus").filter((f) => f.endsWith(".txt.zst")).sort()) {
  const all = zstdRead(join("data/corpus", f));
  const cut = all.subarray(0, PREFIX_BYTES).lastIndexOf(0x0a) + 1;
  texts.push({ name: f.replace(".txt.zst", ""), file: join("data/corpus", f), bytes: all.subarray(0, cut) });
}

for (const name of ["qwen3", "deepseek_v3", "gptoss", "llama2"]) {
  const tokenizerJSON = JSON.parse(zstdRead(join(here, name, "tokenizer.json.zst")).toString("utf8"));
  const tokenizerConfig = JSON.parse(readFileSync(join(here, name, "tokenizer_config.json"), "utf8"));
  const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });
  const out = { tokenizer: name, generator: "@lenml/tokenizers 3.7.2", texts: [] };
  for (const t of texts) {
    const s = new TextDecoder("utf-8").decode(t.bytes);
    out.texts.push({
      name: t.name,
      file: t.file,
      bytes: t.bytes.length,
      ids: tok.encode(s, { add_special_tokens: false }),
      ids_special: tok.encode(s, { add_special_tokens: true }),
    });
  }
  const path = join(here, name, "goldens.json");
  writeFileSync(path, JSON.stringify(out));
  execFileSync("zstd", ["-q", "-19", "-f", "--rm", path, "-o", path + ".zst"]);
  console.log(name, out.texts.map((t) => `${t.name}:${t.ids.length}`).join(" "));
}
