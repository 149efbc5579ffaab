#include "core/process_usage.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>

#include "core/memory.h"

namespace eq {
namespace {

// The "read_bytes: N" line of /proc/self/io; 0 when absent.
uint64_t io_read_bytes() {
  std::ifstream in("/proc/self/io");
  std::string line;
  unsigned long long v = 0;
  while (std::getline(in, line))
    if (std::sscanf(line.c_str(), "read_bytes: %llu", &v) == 1) return v;
  return 0;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

ProcessUsage process_usage() {
  ProcessUsage u;
  rusage ru{};
  if (getrusage(RUSAGE_SELF, &ru) == 0)
    u.cpu_seconds = double(ru.ru_utime.tv_sec) + double(ru.ru_stime.tv_sec) +
                    1e-6 * (double(ru.ru_utime.tv_usec) + double(ru.ru_stime.tv_usec));
  u.read_bytes = io_read_bytes();
  u.peak_rss_bytes = proc_status_bytes("VmHWM");
  u.rss_anon_bytes = proc_status_bytes("RssAnon");
  u.rss_file_bytes = proc_status_bytes("RssFile");
  return u;
}

void PhaseMeter::start(std::string name) {
  stop();
  peak_ = std::max(peak_, process_usage().peak_rss_bytes);
  PhaseUsage& p = phases_.emplace_back();
  p.name = std::move(name);
  p.peak_is_phase_own = reset_peak_rss();
  running_ = true;
  t0_ = now_seconds();
  u0_ = process_usage();
}

void PhaseMeter::stop() {
  if (!running_) return;
  running_ = false;
  const ProcessUsage u = process_usage();
  PhaseUsage& p = phases_.back();
  p.seconds = now_seconds() - t0_;
  p.cpu_seconds = u.cpu_seconds - u0_.cpu_seconds;
  p.read_bytes = u.read_bytes >= u0_.read_bytes ? u.read_bytes - u0_.read_bytes : 0;
  p.peak_rss_bytes = u.peak_rss_bytes;
  p.rss_anon_bytes = u.rss_anon_bytes;
  p.rss_file_bytes = u.rss_file_bytes;
  peak_ = std::max(peak_, u.peak_rss_bytes);
}

uint64_t PhaseMeter::peak_rss_bytes() const { return std::max(peak_, process_usage().peak_rss_bytes); }

}  // namespace eq
