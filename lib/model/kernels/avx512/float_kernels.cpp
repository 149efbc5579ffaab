// Eigen float32 GEMM, softmax and SiLU compiled with this folder's ISA flags (see CMakeLists.txt).
#define EQ_KERNEL_ISA avx512
#include "model/kernels/float_kernels_impl.h"
