// The evaluation inputs of eval and tune: text files (encoded by a model's
// tokenizer) and token files, read into labeled token sequences, one per file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "eval/quality.h"

namespace eq::eval {

struct TextInputs {
  std::vector<std::string> texts, token_files;
  int64_t max_tokens = 0;     // per text; 0 = all
  std::string doc_separator;  // as typed (C escapes decoded when read)
};

// "data/corpus/eval_prose.txt.zst" -> "prose"; token files keep their stem.
std::string domain_label(const std::string& path);
// Texts first, then token files. --text is encoded by the tokenizer of the
// model in `model_folder` (read only when there is text); each input must hold
// at least one scored window (2 tokens).
std::vector<LabeledTokens> read_text_inputs(const TextInputs& in, const std::string& model_folder,
                                            int64_t vocab_size);

}  // namespace eq::eval
