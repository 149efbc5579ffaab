// Decoder layers run by another executor (the GPU's, exec/cuda/device_layers.h)
// in place of Model::forward_layer's own code. The model asks the runner which
// layers it takes; consecutive ones run in one call, so the runner keeps the
// hidden state where it computes between them and moves it once each way.
// A runner's answer for a layer must not change over a model's life: the
// layers it runs keep their keys and values with it (KvCache::attachment), the
// others in the KvCache.
#pragma once

#include <cstdint>

#include "model/kv_cache.h"

namespace eq::model {

class LayerRunner {
 public:
  virtual ~LayerRunner() = default;
  virtual bool runs(int64_t layer) const = 0;
  // Layers [first, last), each one runs() says it takes, on h [batch*seq_len,
  // hidden] (host, in place) at positions cache.length() .. +seq_len-1 (the
  // cache does not advance): the same operations as Model::forward_layer,
  // within float32 rounding.
  virtual void forward_layers(int64_t first, int64_t last, float* h, int64_t batch, int64_t seq_len,
                              KvCache& cache) = 0;
};

}  // namespace eq::model
