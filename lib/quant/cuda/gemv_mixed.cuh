// A format's part of a decode launch of several formats (gemv_mixed.cu): the
// parameters its family's block body takes, and how many blocks a job needs.
#pragma once

#include "quant/cuda/gemv_stream.cuh"

namespace eq::quant::cuda {

// Only the column bit-stream family takes part so far.
struct GemvSegment {
  int body = 0;            // stream::Body
  int blocks_per_job = 0;  // blocks of one job (its output columns)
  stream::StreamParams stream;
};

}  // namespace eq::quant::cuda
