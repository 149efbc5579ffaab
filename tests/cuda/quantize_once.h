// How decode launches quantize their int8 x (quant::cuda::set_quantize_once:
// 1 once for all their blocks, 0 in each block) for a scope of a GPU test,
// the mode as it was after, also when the scope is left by an exception or a
// failed ASSERT.
#pragma once

#include "quant/cuda/cuda_gpus.h"

namespace eq::test {

class QuantizeOnce {
 public:
  explicit QuantizeOnce(int mode) : was_(quant::cuda::set_quantize_once(mode)) {}
  ~QuantizeOnce() { quant::cuda::set_quantize_once(was_); }
  QuantizeOnce(const QuantizeOnce&) = delete;
  QuantizeOnce& operator=(const QuantizeOnce&) = delete;

 private:
  int was_;
};

}  // namespace eq::test
