// expertquant tokenize: text to token ids, or ids back to text, with a model's
// tokenizer (--model) or a tokenizer.json (--tokenizer) (lib/tokenizer).
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/error.h"
#include "io/text_file.h"
#include "io/tokens.h"
#include "pack/folder_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace eq::app {

namespace {

struct TokenizeCliOptions {
  std::string model, tokenizer_file, text, tokens;
  bool json = false, decode = false, no_special = false, add_special = false;
};

std::unique_ptr<tokenizer::Tokenizer> open_tokenizer(const TokenizeCliOptions& o) {
  if (!o.model.empty()) return pack::load_folder_tokenizer(o.model, tokenizer::read_model_vocab_size(o.model));
  // A tokenizer file inside a packed folder is one of its sealed side files.
  const std::filesystem::path folder = std::filesystem::path(o.tokenizer_file).parent_path();
  pack::check_packed_side_files(folder.empty() ? "." : folder.string());
  return tokenizer::load_tokenizer_file_beside_config(o.tokenizer_file);
}

int run_encode(const tokenizer::Tokenizer& tok, const TokenizeCliOptions& o) {
  // The text is one document: read no more of the file than one may hold.
  const std::string text = io::read_text_prefix(o.text, 0, tokenizer::kMaxDocumentBytes);
  const std::vector<int32_t> ids = tok.encode(text, !o.no_special);
  if (o.json) {
    std::cout << nlohmann::json(ids).dump() << "\n";
    return 0;
  }
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) line += ' ';
    line += std::to_string(ids[i]);
  }
  std::cout << line << "\n";
  return 0;
}

int run_decode(const tokenizer::Tokenizer& tok, const TokenizeCliOptions& o) {
  const io::TokenSequences seqs = io::read_token_file(o.tokens);
  io::check_token_range(seqs, tok.vocab_size(), o.tokens);
  nlohmann::json texts = nlohmann::json::array();
  for (size_t s = 0; s < seqs.sequences.size(); ++s) {
    std::string text;
    try {
      text = tok.decode(seqs.sequences[s], o.no_special);
    } catch (const Error& e) {
      fail(e.kind(), o.tokens + ": sequence " + std::to_string(s) + ": " + e.what());
    }
    if (o.json) texts.push_back(text);
    else std::cout << (s ? "\n" : "") << text;
  }
  if (o.json) std::cout << texts.dump() << "\n";
  std::cout.flush();
  return 0;
}

}  // namespace

Command add_tokenize(CLI::App& app) {
  auto o = std::make_shared<TokenizeCliOptions>();
  CLI::App* sub = app.add_subcommand("tokenize", "Text to token ids (or ids back to text) with a model's tokenizer");
  auto* model = sub->add_option("--model", o->model, "Model folder: its tokenizer.json, or bytes for a 256-token vocabulary");
  auto* file = sub->add_option("--tokenizer", o->tokenizer_file, "A tokenizer.json (.zst accepted); tokenizer_config.json beside it is read too");
  model->excludes(file);
  auto* text = sub->add_option("--text", o->text, "Text file to encode (.zst accepted)");
  auto* tokens = sub->add_option("--tokens", o->tokens, "Token-id file to decode (json, npy, u32, i32), with --decode");
  text->excludes(tokens);
  sub->add_flag("--decode", o->decode, "Turn the ids of --tokens back into text");
  auto* add = sub->add_flag("--add-special", o->add_special,
                            "Encode: put the tokenizer's special tokens (bos/eos) around the text (default)");
  auto* none = sub->add_flag("--no-special", o->no_special,
                             "Encode: no special tokens around the text; decode: leave special tokens out");
  add->excludes(none);
  sub->add_flag("--json", o->json, "Print one JSON array (of ids, or of texts with --decode)");
  return {sub, [o] {
            if (o->model.empty() && o->tokenizer_file.empty()) invalid("tokenize: give --model DIR or --tokenizer FILE");
            if (o->decode && o->tokens.empty()) invalid("--decode: give the ids to decode with --tokens FILE");
            if (!o->decode && o->text.empty()) invalid("tokenize: give --text FILE to encode (or --decode --tokens FILE)");
            if (!o->decode && !o->tokens.empty()) invalid("--tokens: ids are read only with --decode");
            const auto tok = open_tokenizer(*o);
            return o->decode ? run_decode(*tok, *o) : run_encode(*tok, *o);
          }};
}

}  // namespace eq::app
