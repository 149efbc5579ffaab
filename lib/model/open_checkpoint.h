// A checkpoint opened as a model reads it: its tensors and its config.json.
// Every reader of a checkpoint (a source or a packed folder) opens it here,
// so a multimodal wrapper's language model is always seen under the "model."
// names every reader uses (Architecture::language_model_prefix).
#pragma once

#include <memory>
#include <string>

#include "io/safetensors.h"
#include "model/config.h"

namespace eq::model {

struct ModelCheckpoint {
  std::unique_ptr<io::Checkpoint> checkpoint;
  ModelConfig config;
};

// `path`: a folder or a .safetensors file (io::Checkpoint::open). `config`:
// already parsed from this checkpoint's config.json; null: read from the
// checkpoint's folder (an error when it is missing). Tensors stored under a
// multimodal wrapper's prefix are renamed to "model."; tensors already named
// so (a packed folder) are left as they are.
ModelCheckpoint open_checkpoint(const std::string& path, const ModelConfig* config = nullptr);

}  // namespace eq::model
