#include "core/process_usage.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <chrono>
#include <cstring>

namespace eq {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;

TEST(ProcessUsage, ReadsTheKernelsFigures) {
  const ProcessUsage u = process_usage();
  EXPECT_GT(u.peak_rss_bytes, 0u);
  EXPECT_GT(u.rss_anon_bytes + u.rss_file_bytes, 0u);
  EXPECT_GE(u.peak_rss_bytes, u.rss_anon_bytes);
}

// A phase that touches 96 MiB peaks at least that much above where it began;
// the next, once the block is freed, does not carry that peak when the kernel
// allows resetting the mark.
TEST(PhaseMeter, MeasuresEachPhasesOwnPeakAndCpu) {
  PhaseMeter meter;
  meter.start("touch");
  const uint64_t before = process_usage().rss_anon_bytes;
  {
    // Mapped and unmapped directly: a sanitizer's allocator keeps freed heap
    // blocks in quarantine, still resident.
    const size_t n = 96 * kMiB;
    void* block = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(block, MAP_FAILED);
    std::memset(block, 1, n);
    ASSERT_EQ(munmap(block, n), 0);
  }
  meter.stop();
  const PhaseUsage a = meter.phases().back();
  EXPECT_EQ(a.name, "touch");
  EXPECT_GE(a.peak_rss_bytes, before + 96 * kMiB);

  meter.start("spin");
  const auto t0 = std::chrono::steady_clock::now();
  volatile double x = 0;
  while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(60)) x = x + 1.0;
  meter.stop();
  ASSERT_EQ(meter.phases().size(), 2u);
  const PhaseUsage b = meter.phases().back();
  EXPECT_EQ(b.name, "spin");
  EXPECT_GE(b.seconds, 0.06);
  EXPECT_GT(b.cpu_seconds, 0.02);
  EXPECT_LE(b.cpu_seconds, b.seconds * 64);
  if (b.peak_is_phase_own) EXPECT_LT(b.peak_rss_bytes + 64 * kMiB, a.peak_rss_bytes);
  else EXPECT_GE(b.peak_rss_bytes, a.peak_rss_bytes);
  // The run's peak is not lost by the resets.
  EXPECT_GE(meter.peak_rss_bytes(), a.peak_rss_bytes);
}

}  // namespace
}  // namespace eq
