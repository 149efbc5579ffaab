#include "io/hashes_as_read.h"

#include "io/quantized_source.h"
#include "io/safetensors.h"

namespace eq::io {

HashesAsRead::HashesAsRead(const SourceTensors& src) : src_(src) {
  src_.set_conversion_observer([this](std::string_view name) { converted(name); });
}

HashesAsRead::~HashesAsRead() {
  if (observing_) src_.set_conversion_observer(nullptr);
}

uint64_t HashesAsRead::hash(const std::string& stored) { return full_tensor_hash(src_.checkpoint(), stored); }

void HashesAsRead::converted(std::string_view logical_name) {
  for (const std::string& stored : src_.stored_names(logical_name)) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!started_.insert(stored).second) continue;  // another conversion hashes it
    }
    const uint64_t h = hash(stored);
    std::lock_guard<std::mutex> lock(mu_);
    full_[stored] = h;
    bytes_as_read_ += src_.checkpoint().info(stored).nbytes();
  }
}

void HashesAsRead::finish(TensorHashes& hashes) {
  src_.set_conversion_observer(nullptr);  // waits for none: conversions have ended with the pass
  observing_ = false;
  for (TensorHash& t : hashes) {
    auto it = full_.find(t.name);
    if (it != full_.end()) {
      t.full = it->second;
      continue;
    }
    t.full = hash(t.name);
    bytes_after_ += src_.checkpoint().info(t.name).nbytes();
  }
}

}  // namespace eq::io
