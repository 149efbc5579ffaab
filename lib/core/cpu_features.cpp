#include "core/cpu_features.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define EQ_X86 1
#endif

namespace eq {

namespace {

#ifdef EQ_X86
unsigned long long read_xcr0() {
  unsigned int eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<unsigned long long>(edx) << 32) | eax;
}
#endif

CpuFeatures probe() {
  CpuFeatures f;
#ifdef EQ_X86
  unsigned int a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27);
  f.fma = c & (1u << 12);
  f.f16c = c & (1u << 29);
  const bool avx = c & (1u << 28);
  if (osxsave && avx) {
    const unsigned long long xcr0 = read_xcr0();
    f.os_avx = (xcr0 & 0x6) == 0x6;             // SSE + AVX state
    f.os_avx512 = f.os_avx && (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
  }
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.avx2 = b & (1u << 5);
    f.bmi2 = b & (1u << 8);
    f.avx512f = b & (1u << 16);
    f.avx512dq = b & (1u << 17);
    f.avx512bw = b & (1u << 30);
    f.avx512vl = b & (1u << 31);
    f.avx512vnni = c & (1u << 11);
  }
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) {
    f.avx_vnni = a & (1u << 4);
    f.avx512bf16 = a & (1u << 5);
  }
#endif
  return f;
}

Isa compute_detected() {
  const CpuFeatures& f = cpu_features();
  Isa isa = Isa::kGeneric;
  if (f.os_avx && f.avx2 && f.fma && f.f16c && f.bmi2) isa = Isa::kAvx2;
  if (isa == Isa::kAvx2 && f.os_avx512 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq &&
      f.avx512vnni && f.avx512bf16)
    isa = Isa::kAvx512;
  return isa;
}

std::atomic<int> g_forced{-1};

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = probe();
  return f;
}

Isa detected_isa() {
  static const Isa isa = compute_detected();
  return isa;
}

Isa active_isa() {
  const int forced = g_forced.load(std::memory_order_relaxed);
  if (forced >= 0) return static_cast<Isa>(forced);
  static const Isa isa = [] {
    Isa best = detected_isa();
    const char* env = std::getenv("EXPERTQUANT_ISA");
    if (!env) return best;
    Isa want = best;
    if (std::strcmp(env, "generic") == 0) want = Isa::kGeneric;
    else if (std::strcmp(env, "avx2") == 0) want = Isa::kAvx2;
    else if (std::strcmp(env, "avx512") == 0) want = Isa::kAvx512;
    return want < best ? want : best;
  }();
  return isa;
}

void set_active_isa_for_testing(Isa isa) {
  const Isa best = detected_isa();
  g_forced.store(static_cast<int>(isa < best ? isa : best), std::memory_order_relaxed);
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kGeneric: return "generic";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "?";
}

std::string_view cpu_model_name() {
  static const std::string name = [] {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("model name", 0) == 0) {
        auto pos = line.find(':');
        if (pos != std::string::npos) return line.substr(line.find_first_not_of(' ', pos + 1));
      }
    }
    return std::string("unknown CPU");
  }();
  return name;
}

}  // namespace eq
