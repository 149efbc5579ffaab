// Functions the CPU code and the CUDA kernels (lib/*/cuda/*.cu) share as one
// source: marked EQ_HOST_DEVICE, they compile for both under nvcc and as plain
// inline functions elsewhere, so a GPU path that must equal the CPU's bit for
// bit runs the same lines instead of a port of them.
#pragma once

#if defined(__CUDACC__)
#define EQ_HOST_DEVICE __host__ __device__
#else
#define EQ_HOST_DEVICE
#endif
