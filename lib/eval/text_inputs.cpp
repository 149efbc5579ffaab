#include "eval/text_inputs.h"

#include <filesystem>
#include <memory>

#include "core/error.h"
#include "io/prompt_text.h"
#include "io/tokens.h"
#include "pack/folder_tokenizer.h"
#include "tokenizer/text_documents.h"

namespace eq::eval {

std::string domain_label(const std::string& path) {
  std::string name = std::filesystem::path(path).filename().string();
  for (const char* ext : {".zst", ".txt", ".json", ".npy", ".u32", ".i32", ".bin"})
    if (name.size() > std::string(ext).size() && name.ends_with(ext)) name.resize(name.size() - std::string(ext).size());
  if (name.starts_with("eval_") && name.size() > 5) name = name.substr(5);
  return name;
}

std::vector<LabeledTokens> read_text_inputs(const TextInputs& in, const std::string& model_folder,
                                            int64_t vocab_size) {
  std::vector<LabeledTokens> out;
  auto cap = [&](std::vector<int32_t>& t) {
    if (in.max_tokens > 0 && static_cast<int64_t>(t.size()) > in.max_tokens) t.resize(static_cast<size_t>(in.max_tokens));
  };
  // A window scores every token after its first: fewer than 2 tokens score
  // nothing, and would report 0 bits rather than fail.
  auto require_window = [](const std::vector<int32_t>& t, const std::string& path) {
    if (t.size() < 2)
      invalid(path + ": " + (t.empty() ? std::string("empty") : "only 1 token") +
              ": too few tokens for one scored window (at least 2)");
  };
  if (!in.doc_separator.empty() && in.texts.empty())
    invalid("--doc-separator: applies to --text (the sequences of --tokens are its documents)");
  std::unique_ptr<tokenizer::Tokenizer> tok;
  if (!in.texts.empty()) tok = pack::load_folder_tokenizer(model_folder, vocab_size);
  const tokenizer::TextDocumentOptions to{io::unescape_prompt(in.doc_separator), in.max_tokens};
  const tokenizer::TextReadOptions read{false, tokenizer::kPassMaxTokens};
  for (const std::string& p : in.texts) {
    LabeledTokens t{domain_label(p), {}, {}};
    for (auto& d : tokenizer::read_text_documents(p, *tok, to, read).documents) {
      t.document_starts.push_back(static_cast<int64_t>(t.tokens.size()));
      t.tokens.insert(t.tokens.end(), d.begin(), d.end());
    }
    require_window(t.tokens, p);
    out.push_back(std::move(t));
  }
  for (const std::string& p : in.token_files) {
    io::TokenSequences seqs = io::read_token_file(p);
    io::check_token_range(seqs, vocab_size, p);
    LabeledTokens t{domain_label(p), {}, {}};
    for (const auto& s : seqs.sequences) t.tokens.insert(t.tokens.end(), s.begin(), s.end());
    cap(t.tokens);
    require_window(t.tokens, p);
    out.push_back(std::move(t));
  }
  if (out.empty()) invalid("give evaluation input with --text FILE or --tokens FILE");
  return out;
}

}  // namespace eq::eval
