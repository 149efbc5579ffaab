// The gated activation of an MLP: out = act(gate, up), elementwise, between
// the gate/up projections and down.
//   kSwiGlu         silu(gate) * up, silu(g) = g / (1 + exp(-g))
//   kSwiGluClamped  gpt-oss: g = min(gate, limit), u = clamp(up, -limit, limit),
//                   out = (u + 1) * g * sigmoid(alpha * g). The gate is clamped
//                   from above only (a very negative gate already gives ~0).
// alpha and limit are read by kSwiGluClamped only.
#pragma once

#include <cstdint>

namespace eq::model {

enum class ActivationKind : uint8_t { kSwiGlu, kSwiGluClamped };

struct Activation {
  ActivationKind kind = ActivationKind::kSwiGlu;
  float alpha = 1.702f, limit = 7.0f;
  bool operator==(const Activation&) const = default;
};

}  // namespace eq::model
