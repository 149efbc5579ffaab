// A format's part of a decode launch of several formats (gemv_mixed.cu): the
// parameters its family's block body takes, and how many blocks a job needs.
#pragma once

#include <cstddef>

#include "quant/cuda/gemv_rowmajor.cuh"
#include "quant/cuda/gemv_stream.cuh"

namespace eq::quant::cuda {

// The column bit-stream family and int8_row take part so far.
struct GemvSegment {
  enum Family : int { kStream = 0, kInt8Row = 1 };
  Family family = kStream;
  int body = 0;             // kStream: stream::Body
  int blocks_per_job = 0;   // blocks of one job (its output columns)
  size_t stage_bytes = 0;   // the dynamic shared memory a block of it stages x in
  stream::StreamParams stream;  // kStream
  rowmajor::RowParams row;      // kInt8Row
};

}  // namespace eq::quant::cuda
