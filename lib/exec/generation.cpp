#include "exec/generation.h"

#include "core/error.h"
#include "exec/open_for_run.h"
#include "io/safetensors.h"
#include "io/text_file.h"
#include "io/tokens.h"
#include "pack/folder_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace eq::exec {

Generation prepare_generation(const GenerationRequest& q) {
  if (q.model.empty() && q.packed.empty()) invalid("give --model CHECKPOINT or --packed FOLDER");
  Generation g;
  if (!q.packed.empty()) {
    PackedModelOptions po;
    po.model_path = q.model;
    po.verify = q.verify;
    g.packed = open_for_run(q.packed, po, q.dispatch, q.runtime);
    g.model = &g.packed->model();
  } else {
    g.reference = model::Model::open(q.model);
    g.model = g.reference.get();
  }
  const model::ModelConfig& c = g.model->config();
  const int sources = q.prompt.has_value() + !q.prompt_file.empty() + !q.tokens_file.empty();
  if (sources != 1) invalid("give exactly one of --prompt, --prompt-file, --tokens");
  // The packed folder holds the tokenizer files pack copied from the source.
  // Token ids in, and no tokenizer: ids out, as text cannot be made.
  const std::string folder = !q.packed.empty() ? q.packed : g.reference->checkpoint().folder();
  if (q.tokens_file.empty() || pack::folder_has_tokenizer(folder, c.vocab_size))
    g.tokenizer = pack::load_folder_tokenizer(folder, c.vocab_size);
  if (!q.tokens_file.empty()) {
    io::TokenSequences s = io::read_token_file(q.tokens_file);
    io::check_token_range(s, c.vocab_size, q.tokens_file);
    if (s.sequences.size() != 1)
      invalid(q.tokens_file + ": expected one sequence, got " + std::to_string(s.sequences.size()));
    g.prompt = s.sequences[0];
  } else {
    // Files are sent byte for byte.
    // A prompt is one document: read no more of the file than one may hold.
    const std::string text = q.prompt ? *q.prompt : io::read_text_prefix(q.prompt_file, 0, tokenizer::kMaxDocumentBytes);
    g.prompt = g.tokenizer->encode(text, /*add_special=*/true);
  }
  if (g.prompt.empty())
    invalid(std::string(!q.prompt_file.empty() ? q.prompt_file : !q.tokens_file.empty() ? q.tokens_file : "--prompt") +
            ": empty prompt (at least one token is needed)");
  return g;
}

}  // namespace eq::exec
