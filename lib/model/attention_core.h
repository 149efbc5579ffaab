// The step every attention kind shares: causal softmax attention of one
// query head of one sequence over the keys and values of its past positions
// (their projections: model/projection.h).
#pragma once

#include <cstdint>

#include "model/float_buffer.h"

namespace eq::model {

// Part of the query·key product: query row t at q + t * ldq, key of position
// j at k + j * ldk, `dim` values each. A score sums its parts in order.
struct QkPart {
  const float* q;
  int64_t ldq;
  const float* k;
  int64_t ldk;
  int64_t dim;
};

// `rows` query rows at positions start .. start+rows-1 of one sequence:
// scores over keys 0 .. position (causal), times `scale`, softmax, times the
// values (position j at v + j * ldv, dv wide); row t's result goes to
// out + t * ldo. Queries are taken in blocks, each needing keys up to its
// last row only. `scores` is scratch. Single-threaded.
// `window` > 0: a query at position p sees keys j > p - window only.
// `sink` (may be null): one more logit, unscaled, in every row's softmax; it
// takes its share of the probability and contributes no value.
void attend_causal(int64_t rows, int64_t start, const QkPart* parts, int n_parts, const float* v, int64_t ldv,
                   int64_t dv, float scale, float* out, int64_t ldo, FloatBuffer& scores, int64_t window = 0,
                   const float* sink = nullptr);

}  // namespace eq::model
