#include "model/open_checkpoint.h"

namespace eq::model {

ModelCheckpoint open_checkpoint(const std::string& path, const ModelConfig* config) {
  ModelCheckpoint m;
  m.checkpoint = io::Checkpoint::open(path);
  m.config = config ? *config : load_config(m.checkpoint->folder());
  if (!m.config.arch->language_model_prefix.empty())
    m.checkpoint->rename_prefix(m.config.arch->language_model_prefix, "model.");
  return m;
}

}  // namespace eq::model
