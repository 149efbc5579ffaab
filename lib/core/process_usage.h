// What the process has used so far, from the OS (Linux /proc, getrusage):
// a long command measures each of its phases by the difference between two
// samples, so a report can say which phase read the disk or held the memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace eq {

struct ProcessUsage {
  double cpu_seconds = 0;       // user + system, all threads
  uint64_t read_bytes = 0;      // fetched from storage (/proc/self/io read_bytes; page-cache hits not counted)
  uint64_t peak_rss_bytes = 0;  // VmHWM: since start, or since the last reset_peak_rss()
  uint64_t rss_anon_bytes = 0;  // RssAnon now: heap and other private memory
  uint64_t rss_file_bytes = 0;  // RssFile now: mapped file pages (the OS can take them back)
};

// 0 for a figure the kernel does not give.
ProcessUsage process_usage();

// One phase of a command: wall and CPU seconds, bytes read, its own peak RSS
// (the peak mark is reset when it starts, where the kernel allows) and the
// resident set it left behind.
struct PhaseUsage {
  std::string name;
  double seconds = 0, cpu_seconds = 0;
  uint64_t read_bytes = 0;
  uint64_t peak_rss_bytes = 0;  // the process's peak since start when the mark could not be reset
  bool peak_is_phase_own = false;
  uint64_t rss_anon_bytes = 0, rss_file_bytes = 0;  // at its end
};

// Measures consecutive phases: start("load"), start("quality") (which ends
// "load"), ..., stop(); phases() in the order they ran.
class PhaseMeter {
 public:
  // Ends the phase in progress, if any, and starts `name`.
  void start(std::string name);
  // Ends the phase in progress, if any.
  void stop();
  const std::vector<PhaseUsage>& phases() const { return phases_; }
  // The highest peak RSS over every phase measured and the time before them
  // (resetting the mark per phase hides the process's own VmHWM).
  uint64_t peak_rss_bytes() const;

 private:
  std::vector<PhaseUsage> phases_;
  bool running_ = false;
  double t0_ = 0;
  ProcessUsage u0_;
  uint64_t peak_ = 0;
};

}  // namespace eq
