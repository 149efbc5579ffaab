// Every quality and latency figure is finite before it is reported: a NaN or
// an infinity is an error naming the figure, never a printed result. Quality
// figures go non-finite when a model produces non-finite logits or hidden
// states (a damaged pack or checkpoint: bad input, exit 2); a timing figure
// could only go non-finite through a bug of ours (exit 70).
#pragma once

#include <cmath>
#include <string>

#include "core/error.h"

namespace eq::eval {

// Throws eq::Error of `kind`: "<figure> is nan: <cause>".
inline void require_finite(double value, const std::string& figure, const std::string& cause,
                           ErrorKind kind = ErrorKind::kInvalidInput) {
  if (!std::isfinite(value))
    fail(kind, figure + " is " + (std::isnan(value) ? "nan" : value > 0 ? "+inf" : "-inf") + ": " + cause);
}

inline constexpr const char* kPackedLogitsCause =
    "the packed model produced non-finite logits (a damaged pack? run expertquant verify)";
inline constexpr const char* kModelLogitsCause = "the model produced non-finite logits (a damaged checkpoint?)";
inline constexpr const char* kEitherLogitsCause =
    "the packed or the reference model produced non-finite values (a damaged pack or checkpoint?)";

}  // namespace eq::eval
