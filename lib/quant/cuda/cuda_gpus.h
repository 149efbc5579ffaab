// The GPUs a run uses, how decode kernels launch and the half-precision
// trellis search: the CUDA side of
// quant/gpus.h (runtime.cu, trellis_viterbi.cu; unavailable.cpp without CUDA).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace eq::quant::cuda {

// The GPUs used, by CUDA index, in order (empty: every visible one, the
// default); checked against the GPUs present by unavailable_reason().
void select_gpus(const std::vector<int>& ids);
// How many GPUs are used (0 without a usable GPU).
size_t gpu_count();
// The calling thread's kernels run on GPU number worker % gpu_count().
void use_gpu(size_t worker);

// Programmatic dependent launch of the layers' kernels (launch_kernel in
// cuda_common.cuh): whether launches on the current GPU use it (code built
// for compute capability 9.0 or later and the switch on), and the switch
// (EXPERTQUANT_GPU_PDL at first, default on; returns its previous value).
// It changes no bit; a graph keeps the launches it was captured with.
bool programmatic_launches();
bool allow_programmatic_launches(bool on);

// Whether a one-row decode call quantizes x once for all its blocks
// (int8_input.cuh, quantize_once): 1 always, 0 never, -1 by the launch's
// size (the default; EXPERTQUANT_GPU_QUANTIZE_ONCE=0 or 1 at first). Returns
// the previous mode. It changes no bit; a call's scratch is sized for either.
int set_quantize_once(int mode);

// Whether the experts' prefill products multiply x as two bf16 parts, its
// rounding and the residual (gemm_dense.cuh, bf16_products): as
// EXPERTQUANT_GPU_SPLIT_X=0 or 1 says where it is set, else the default,
// off unless set_split_x_default(true) (which returns the previous default).
// eval's quality passes turn it on, so that their figures are the pack's and
// not x's bf16 rounding's (docs/benchmarks.md, "GPU whole model").
bool split_x();
bool set_split_x_default(bool on);

// search_tiles (cuda_quantize.h) with FP16 costs (TrellisSearch::kHalf):
// deterministic, not bit-identical; 1MAD and LUT codes only.
void search_tiles_half(int bits, const float* codes, int64_t count, const float* target, const float* weight,
                       uint16_t* states);

}  // namespace eq::quant::cuda
