// The forward's matrix products: y = x · Wᵀ + bias through a float32 weight
// or a LinearOp, alone or several of one x together (the q, k and v of an
// attention, the gate and up of an MLP), so that an op that runs elsewhere
// moves x there once and the results back once.
#pragma once

#include <cstdint>
#include <span>

#include "model/linear_op.h"
#include "model/weights.h"

namespace eq::model {

// y[n, out] = x[n, in] · Wᵀ + bias, through the float32 weight `w` or `op`
// (one of them set); bias may be null.
void project(const float* x, int64_t n, int64_t in, const Tensor32Ptr& w, const LinearOp* op, int64_t out,
             const Tensor32Ptr& bias, float* y);

// One product of project_shared: as project()'s arguments.
struct Projection {
  const Tensor32Ptr* w = nullptr;
  const LinearOp* op = nullptr;
  int64_t out = 0;
  const Tensor32Ptr* bias = nullptr;  // null: none
  float* y = nullptr;
};

// project() for each of `ps`, all of x[n, in]. The products with an op go to
// the first op's apply_shared together; where it declines, each runs alone.
// The results equal project()'s, bit for bit.
void project_shared(const float* x, int64_t n, int64_t in, std::span<const Projection> ps);

}  // namespace eq::model
