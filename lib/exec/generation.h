// What `expertquant generate` runs: the model (a packed folder set up for a
// run, or a checkpoint's reference model), the tokenizer beside it and the
// prompt as token ids.
#pragma once

#include <optional>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "exec/dispatch.h"
#include "exec/packed_model.h"
#include "exec/runtime_config.h"
#include "model/forward.h"
#include "tokenizer/tokenizer.h"

namespace eq::exec {

struct GenerationRequest {
  std::string model;   // a checkpoint; with packed: its source, optional
  std::string packed;  // a packed folder; empty = the reference model of `model` runs
  bool verify = true;  // the packed folder's checksums at load
  DispatchKind dispatch = DispatchKind::kAuto;  // packed only, as the runtime config below
  RuntimeConfig runtime;
  // Exactly one prompt source: text as sent (escapes already decoded; given
  // but empty is an empty prompt, refused as such), a text file, or a token
  // file of one sequence.
  std::optional<std::string> prompt;
  std::string prompt_file, tokens_file;
};

struct Generation {
  std::unique_ptr<PackedModel> packed;
  std::unique_ptr<model::Model> reference;
  model::Model* model = nullptr;  // the one that runs
  // Null only for a token-file prompt beside a folder without a tokenizer:
  // ids in, ids out.
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  std::vector<int32_t> prompt;
};

Generation prepare_generation(const GenerationRequest& request);

}  // namespace eq::exec
