#include "progress.h"

#include <unistd.h>

#include <cstdio>

#include "format_util.h"

namespace eq::app {

ProgressBar::ProgressBar(std::string label, uint64_t total_bytes, bool verbose)
    : label_(std::move(label)), total_(total_bytes), tty_(isatty(2) != 0), verbose_(verbose),
      start_(std::chrono::steady_clock::now()), last_draw_(start_ - std::chrono::seconds(1)) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::update(uint64_t done, const std::string& step) {
  const auto now = std::chrono::steady_clock::now();
  const double secs = std::chrono::duration<double>(now - start_).count();
  const double rate = secs > 0 ? double(done) / secs : 0;
  const double eta = rate > 0 && total_ > done ? double(total_ - done) / rate : 0;
  if (tty_) {
    if (now - last_draw_ < std::chrono::milliseconds(100) && done < total_) return;
    last_draw_ = now;
    const int width = 24;
    const double frac = total_ ? std::min(1.0, double(done) / double(total_)) : 1.0;
    std::string bar(size_t(frac * width), '#');
    bar.resize(width, '.');
    std::fprintf(stderr, "\r\033[K%s [%s] %5.1f%% %s/s ETA %.0fs  %s", label_.c_str(), bar.c_str(), 100 * frac,
                 human_bytes(rate).c_str(), eta, step.c_str());
    std::fflush(stderr);
  } else if (verbose_ && step != last_step_) {
    std::fprintf(stderr, "%s: %s (%s of %s, %s/s)\n", label_.c_str(), step.c_str(), human_bytes(double(done)).c_str(),
                 human_bytes(double(total_)).c_str(), human_bytes(rate).c_str());
  }
  last_step_ = step;
}

void ProgressBar::finish() {
  if (finished_) return;
  finished_ = true;
  if (tty_) std::fprintf(stderr, "\r\033[K");
}

}  // namespace eq::app
