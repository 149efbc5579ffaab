// A progress bar on stderr: bytes done, bytes/s and ETA, redrawn in place on a
// terminal; silent when stderr is not a terminal unless verbose (then one line
// per step, no carriage returns).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace eq::app {

class ProgressBar {
 public:
  ProgressBar(std::string label, uint64_t total_bytes, bool verbose);
  ~ProgressBar();
  void update(uint64_t done_bytes, const std::string& step);
  // Clears the bar (terminal) so the summary starts on a clean line.
  void finish();

 private:
  std::string label_, last_step_;
  uint64_t total_;
  bool tty_, verbose_, finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace eq::app
