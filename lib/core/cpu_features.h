// Run-time ISA selection. The CPU must report the feature (CPUID) *and* the OS
// must save the matching register state (XCR0 via XGETBV); without the second
// check an AVX-512 kernel can fault on a kernel that does not enable ZMM state.
#pragma once

#include <string_view>

namespace eq {

// Ordered: a higher level implies every lower one.
enum class Isa { kGeneric = 0, kAvx2 = 1, kAvx512 = 2 };

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false, bmi2 = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512vnni = false, avx512bf16 = false, avx_vnni = false;
  bool os_avx = false, os_avx512 = false;  // XCR0 says the OS saves YMM / ZMM+opmask state
};

const CpuFeatures& cpu_features();
// The best ISA level this machine supports.
Isa detected_isa();
// The ISA kernels use: detected_isa(), lowered by EXPERTQUANT_ISA=generic|avx2|avx512
// (never raised above what the machine supports). Read once.
Isa active_isa();
// For tests: force a level for subsequent active_isa() calls (clamped to detected).
void set_active_isa_for_testing(Isa isa);

std::string_view isa_name(Isa isa);
// A human description: CPU model name and flags that matter.
std::string_view cpu_model_name();

}  // namespace eq
