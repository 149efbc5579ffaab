#include "io/hashes_as_read.h"

#include <utility>

#include "io/layer_names.h"
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

void HashesAsRead::hash_once(const std::string& stored) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!started_.insert(stored).second) return;  // another conversion hashes it
  }
  const uint64_t h = hash(stored);
  std::lock_guard<std::mutex> lock(mu_);
  full_[stored] = h;
  bytes_as_read_ += src_.checkpoint().info(stored).nbytes();
}

void HashesAsRead::hash_rest_of(int64_t layer) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!layers_done_.insert(layer).second) return;  // a window-order pass comes back to each layer
  }
  const std::string prefix = layer_prefix(layer);
  for (const std::string& stored : src_.checkpoint().tensor_names()) {
    if (stored.starts_with(prefix)) hash_once(stored);
  }
}

void HashesAsRead::converted(std::string_view logical_name) {
  if (const std::optional<int64_t> layer = layer_of(logical_name)) {
    std::optional<int64_t> previous;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (layer != current_layer_) previous = std::exchange(current_layer_, layer);
    }
    if (previous) hash_rest_of(*previous);
  }
  for (const std::string& stored : src_.stored_names(logical_name)) hash_once(stored);
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
