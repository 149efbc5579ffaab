#include "tokenizer/vocab.h"

namespace eq::tokenizer {

bool Vocab::add(const std::string& token, int32_t id) {
  if (static_cast<size_t>(id) < tokens_.size() && present_[id]) return false;
  if (!ids_.emplace(token, id).second) return false;
  if (static_cast<size_t>(id) >= tokens_.size()) {
    tokens_.resize(id + 1);
    present_.resize(id + 1, false);
  }
  tokens_[id] = token;
  present_[id] = true;
  return true;
}

}  // namespace eq::tokenizer
