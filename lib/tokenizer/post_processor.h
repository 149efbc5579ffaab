// Special tokens put around an encoded sequence when add_special is asked
// for: the "post_processor" of tokenizer.json (TemplateProcessing, ByteLevel,
// RobertaProcessing, BertProcessing, Sequence), or the bos/eos switches of
// tokenizer_config.json where it sets them.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tokenizer/component.h"
#include "tokenizer/vocab.h"

namespace eq::tokenizer {

class PostProcessor {
 public:
  // The ids to put before and after a single sequence.
  PostProcessor(std::vector<int32_t> before, std::vector<int32_t> after)
      : before_(std::move(before)), after_(std::move(after)) {}
  void apply(std::vector<int32_t>& ids) const {
    ids.insert(ids.begin(), before_.begin(), before_.end());
    ids.insert(ids.end(), after_.begin(), after_.end());
  }
  const std::vector<int32_t>& before() const { return before_; }
  const std::vector<int32_t>& after() const { return after_; }

 private:
  std::vector<int32_t> before_, after_;
};

// Anything
// other than the listed types is refused (exit 4). `node` null: nothing added.
PostProcessor make_post_processor(const JsonNode& node);

}  // namespace eq::tokenizer
