// Programmatic dependent launch (quant/cuda/cuda_common.cuh) off for a
// scope of a GPU test, the switch as it was after, also when the scope is
// left by an exception or a failed ASSERT.
#pragma once

#include "quant/cuda/cuda_gpus.h"

namespace eq::test {

class PlainLaunches {
 public:
  PlainLaunches() : was_(quant::cuda::allow_programmatic_launches(false)) {}
  ~PlainLaunches() { quant::cuda::allow_programmatic_launches(was_); }
  PlainLaunches(const PlainLaunches&) = delete;
  PlainLaunches& operator=(const PlainLaunches&) = delete;

 private:
  bool was_;
};

}  // namespace eq::test
