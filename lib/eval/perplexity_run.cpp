#include "eval/perplexity_run.h"

#include <algorithm>

#include "core/error.h"
#include "io/safetensors.h"
#include "io/tokens.h"
#include "model/forward.h"
#include "pack/folder_tokenizer.h"
#include "tokenizer/text_documents.h"

namespace eq::eval {


PerplexityRun run_perplexity(const PerplexityRequest& q) {
  if (q.text.empty() == q.tokens.empty()) invalid("give exactly one of --text FILE or --tokens FILE");
  if (!q.doc_separator.empty() && q.text.empty())
    invalid("--doc-separator: applies to --text (the sequences of --tokens are its documents)");
  auto model = model::Model::open(q.model);
  const model::ModelConfig& c = model->config();

  io::TokenSequences input;
  PerplexityRun run;
  run.input = q.text.empty() ? q.tokens : q.text;
  if (!q.text.empty()) {
    const auto tok = pack::load_folder_tokenizer(model->checkpoint().folder(), c.vocab_size);
    input.sequences =
        tokenizer::read_text_documents(q.text, *tok, {q.doc_separator, q.max_tokens}, {false, tokenizer::kPassMaxTokens})
            .documents;
  } else {
    const auto format = io::parse_token_file_format(q.tokens_format);
    if (!format) invalid("--tokens-format: expected auto, json, npy, u32 or i32, got '" + q.tokens_format + "'");
    input = io::read_token_file(q.tokens, *format);
  }
  if (q.max_tokens > 0 && q.text.empty())
    for (auto& s : input.sequences)
      if (static_cast<int64_t>(s.size()) > q.max_tokens) s.resize(q.max_tokens);
  io::check_token_range(input, c.vocab_size, run.input);
  // Every window scores the tokens after its first: with no sequence of 2
  // tokens nothing is scored, and the result would read 0 bits.
  int64_t longest = 0;
  for (const auto& s : input.sequences) longest = std::max<int64_t>(longest, int64_t(s.size()));
  if (longest < 2)
    invalid(run.input + ": " + (longest == 0 ? std::string("empty") : "only 1 token per sequence") +
            ": too few tokens for one scored window (at least 2)");

  run.result = perplexity(*model, input.sequences, q.options);
  run.byte_level = c.byte_level();
  run.cached_weight_bytes = model->weights().cached_bytes();
  run.checkpoint_bytes = model->checkpoint().total_tensor_bytes();
  return run;
}

}  // namespace eq::eval
