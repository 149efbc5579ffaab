// Progress on stderr for every subcommand: one component for bytes, tokens,
// layers and experts. On a terminal the line is redrawn in place (at most
// every 100 ms); elsewhere it is silent unless verbose, which prints a line
// at each 10% of a phase. A phase ends with a 100% line, or with "stopped at
// X%: <why>" when the work ended short of its total, an error unwound it, or
// it was stopped; a silent progress (no terminal, not verbose) prints neither.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace eq::app {

// kMeasurements: timed points of a sweep (tune, eval's latency).
enum class ProgressUnit { kBytes, kTokens, kLayers, kExperts, kMeasurements };

// What one line shows; the lines below are functions of it alone.
struct ProgressSnapshot {
  std::string title;  // "quality", "profile pass"
  ProgressUnit unit = ProgressUnit::kBytes;
  uint64_t done = 0, total = 0;
  double seconds = 0;  // since the phase started
};

// 1,020 tokens / 1.4 MiB.
std::string progress_amount(ProgressUnit unit, uint64_t n);
// "312.4 tokens/s", "12.0 MiB/s"; below 0.1 a second the time of one: "38.2 s/layer".
std::string progress_rate(ProgressUnit unit, double per_second);
// Percent done, rounded down to 0.1 so it reads 100.0 only when done == total.
double progress_percent(uint64_t done, uint64_t total);
// "quality [############............]  49.8%  1,020/2,048 tokens  312.4 tokens/s  ETA 3s  <step>"
std::string progress_line(const ProgressSnapshot& s, const std::string& step);
// "quality 100%  2,048 tokens in 6.6 s  312.4 tokens/s"
std::string progress_done_line(const ProgressSnapshot& s);
// "quality stopped at 49.8% (1,020/2,048 tokens): <why>"
std::string progress_stopped_line(const ProgressSnapshot& s, const std::string& why);

class Progress {
 public:
  // Draws on stderr, as a terminal when stderr is one.
  Progress(std::string label, bool verbose);
  // Draws on `out`, as a terminal when `terminal` (tests).
  Progress(std::string label, bool verbose, bool terminal, std::FILE* out);
  // A phase still open ends with "stopped at X%": an error is unwinding
  // ("an error, reported below") or the command returned before finish().
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Starts a phase (its rate and ETA start over); an open phase ends first.
  // `name` is appended to the label ("profile" + "pass"); empty for none.
  void phase(const std::string& name, ProgressUnit unit);
  // `total` is the caller's total for the phase: the one the work itself counts.
  void update(uint64_t done, uint64_t total, const std::string& step = {});
  // Ends the phase: the 100% line when done == total, else the stopped line.
  void finish();
  // Ends the phase with "stopped at X%: <why>".
  void stop(const std::string& why);

 private:
  ProgressSnapshot snapshot() const;
  void end_line(const std::string& line);

  std::string label_, title_, step_;
  ProgressUnit unit_ = ProgressUnit::kBytes;
  uint64_t done_ = 0, total_ = 0;
  bool verbose_, terminal_, open_ = false;
  int tenths_logged_ = 0;
  int uncaught_ = 0;
  size_t columns_ = 0;  // the terminal's width; 0 = unknown (no cut)
  std::FILE* out_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace eq::app
