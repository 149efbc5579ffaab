// A format's part of a decode launch of several formats (gemv_mixed.cu): the
// parameters its family's block body takes, and how many blocks a job needs.
#pragma once

#include "quant/cuda/gemv_rowmajor.cuh"
#include "quant/cuda/gemv_stream.cuh"

namespace eq::quant::cuda {

struct GemvSegment {
  enum class Family : int { kStream, kRowMajor };
  Family family = Family::kStream;
  int body = 0;            // stream::Body or rowmajor::Body
  int blocks_per_job = 0;  // blocks of one job (its output columns)
  stream::StreamParams stream;  // family kStream
  rowmajor::RowParams row;      // family kRowMajor
};

}  // namespace eq::quant::cuda
