// Eigen float32 GEMM, softmax and the gated activations compiled with this folder's ISA flags (see CMakeLists.txt).
#define EQ_KERNEL_ISA generic
#include "model/kernels/float_kernels_impl.h"
