// Full tensor hashes taken while a pass converts the checkpoint. Each stored
// tensor is hashed once, right after its first conversion, from the pages
// that conversion just brought into the page cache: a pass that reads every
// tensor (profile's layer order) fingerprints the checkpoint without reading
// it a second time from storage. When the conversions move on to a new
// layer ("model.layers.N."), the tensors of the previous one that were never
// converted (experts no token was routed to) are hashed at once, while the
// read-ahead around their neighbours may still hold their pages; finish()
// hashes what is left (lm_head in a profile), reading only those.
#pragma once

#include <cstdint>
#include <optional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include "io/tensor_hashes.h"

namespace eq::io {

class SourceTensors;

class HashesAsRead {
 public:
  // Observes `src`'s conversions until destroyed; `src` must outlive this.
  explicit HashesAsRead(const SourceTensors& src);
  ~HashesAsRead();
  HashesAsRead(const HashesAsRead&) = delete;
  HashesAsRead& operator=(const HashesAsRead&) = delete;

  // Sets the full hash of every entry of `hashes` (stored tensor names),
  // hashing those not converted yet. Stops observing.
  void finish(TensorHashes& hashes);
  // Stored bytes hashed during conversions and in finish().
  uint64_t bytes_hashed_as_read() const { return bytes_as_read_; }
  uint64_t bytes_hashed_after() const { return bytes_after_; }

 private:
  void converted(std::string_view logical_name);
  uint64_t hash(const std::string& stored);
  // Hashes `stored` unless a conversion already started it (counted as read).
  void hash_once(const std::string& stored);
  // Hashes the stored tensors of `layer` not started yet.
  void hash_rest_of(int64_t layer);

  const SourceTensors& src_;
  std::mutex mu_;
  std::set<std::string> started_;
  std::set<int64_t> layers_done_;
  std::map<std::string, uint64_t> full_;
  uint64_t bytes_as_read_ = 0, bytes_after_ = 0;
  std::optional<int64_t> current_layer_;  // the layer conversions are in; none before any
  bool observing_ = true;
};

}  // namespace eq::io
