#include "progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <exception>

#include "format_util.h"

namespace eq::app {
namespace {

const char* unit_name(ProgressUnit u) {
  switch (u) {
    case ProgressUnit::kBytes: return "bytes";
    case ProgressUnit::kTokens: return "tokens";
    case ProgressUnit::kLayers: return "layers";
    case ProgressUnit::kExperts: return "experts";
    case ProgressUnit::kMeasurements: return "measurements";
  }
  return "";
}

// "1.40 MiB/4.00 GiB" or "1,020/2,048 tokens".
std::string of_total(ProgressUnit u, uint64_t done, uint64_t total) {
  if (u == ProgressUnit::kBytes) return human_bytes(double(done)) + "/" + human_bytes(double(total));
  return with_commas(done) + "/" + with_commas(total) + " " + unit_name(u);
}

double rate_of(const ProgressSnapshot& s) { return s.seconds > 0 ? double(s.done) / s.seconds : 0; }

std::string eta_text(const ProgressSnapshot& s) {
  const double rate = rate_of(s);
  if (s.done >= s.total) return "ETA 0s";
  if (rate <= 0) return "ETA --";
  const long secs = std::lround(double(s.total - s.done) / rate);
  char b[48];
  if (secs >= 3600)
    std::snprintf(b, sizeof b, "ETA %ldh%02ldm", secs / 3600, secs / 60 % 60);
  else if (secs >= 60)
    std::snprintf(b, sizeof b, "ETA %ldm%02lds", secs / 60, secs % 60);
  else
    std::snprintf(b, sizeof b, "ETA %lds", secs);
  return b;
}

std::string percent_text(uint64_t done, uint64_t total) {
  char b[16];
  std::snprintf(b, sizeof b, "%.1f%%", progress_percent(done, total));
  return b;
}

}  // namespace

std::string progress_amount(ProgressUnit unit, uint64_t n) {
  if (unit == ProgressUnit::kBytes) return human_bytes(double(n));
  return with_commas(n) + " " + unit_name(unit);
}

std::string progress_rate(ProgressUnit unit, double per_second) {
  if (unit == ProgressUnit::kBytes) return human_bytes(per_second) + "/s";
  char b[48];
  if (per_second > 0 && per_second < 0.1) {
    // A full-size layer takes minutes: "38.2 s/layer", not "0.0 layers/s".
    std::string one = unit_name(unit);
    if (one.ends_with('s')) one.pop_back();
    std::snprintf(b, sizeof b, "%.1f s/%s", 1.0 / per_second, one.c_str());
    return b;
  }
  std::snprintf(b, sizeof b, "%.1f %s/s", per_second, unit_name(unit));
  return b;
}

double progress_percent(uint64_t done, uint64_t total) {
  if (done >= total) return 100.0;
  // Rounded down in integers: 2,047 of 2,048 is 99.9%, never a rounded-up 100.0%.
  const long double tenths = std::floor(1000.0L * (long double)done / (long double)total);
  return double(std::min<long double>(tenths, 999.0L)) / 10.0;
}

std::string progress_line(const ProgressSnapshot& s, const std::string& step) {
  constexpr int kWidth = 24;
  const double pct = progress_percent(s.done, s.total);
  std::string bar(size_t(pct * kWidth / 100.0), '#');
  bar.resize(kWidth, '.');
  char p[16];
  std::snprintf(p, sizeof p, "%5.1f%%", pct);
  std::string line = s.title + " [" + bar + "] " + p + "  " + of_total(s.unit, s.done, s.total) + "  " +
                     progress_rate(s.unit, rate_of(s)) + "  " + eta_text(s);
  if (!step.empty()) line += "  " + step;
  return line;
}

std::string progress_done_line(const ProgressSnapshot& s) {
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f s", s.seconds);
  return s.title + " 100%  " + progress_amount(s.unit, s.total) + " in " + secs + "  " +
         progress_rate(s.unit, rate_of(s));
}

std::string progress_stopped_line(const ProgressSnapshot& s, const std::string& why) {
  return s.title + " stopped at " + percent_text(s.done, s.total) + " (" + of_total(s.unit, s.done, s.total) +
         "): " + why;
}

Progress::Progress(std::string label, bool verbose) : Progress(std::move(label), verbose, isatty(2) != 0, stderr) {
  winsize w{};
  if (terminal_ && ioctl(2, TIOCGWINSZ, &w) == 0) columns_ = w.ws_col;
}

Progress::Progress(std::string label, bool verbose, bool terminal, std::FILE* out)
    : label_(std::move(label)), verbose_(verbose), terminal_(terminal), uncaught_(std::uncaught_exceptions()),
      out_(out) {}

Progress::~Progress() {
  if (!open_) return;
  stop(std::uncaught_exceptions() > uncaught_ ? "an error, reported below" : "the command ended before its total");
}

void Progress::phase(const std::string& name, ProgressUnit unit) {
  if (open_) finish();
  title_ = name.empty() ? label_ : label_ + " " + name;
  unit_ = unit;
  done_ = total_ = 0;
  step_.clear();
  open_ = true;
  tenths_logged_ = 0;
  start_ = std::chrono::steady_clock::now();
  last_draw_ = start_ - std::chrono::seconds(1);
}

ProgressSnapshot Progress::snapshot() const {
  return {title_, unit_, done_, total_, std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count()};
}

void Progress::update(uint64_t done, uint64_t total, const std::string& step) {
  if (!open_) phase("", unit_);
  done_ = done;
  total_ = total;
  step_ = step;
  if (terminal_) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_draw_ < std::chrono::milliseconds(100)) return;  // finish() draws the last state
    last_draw_ = now;
    // Cut to the terminal's width: a wrapped line could not be redrawn in place.
    std::string line = progress_line(snapshot(), step);
    if (columns_ > 1 && line.size() >= columns_) line.resize(columns_ - 1);
    std::fprintf(out_, "\r\033[K%s", line.c_str());
    std::fflush(out_);
  } else if (verbose_) {
    // One line each time the phase passes a tenth; the end line says 100%.
    const int tenths = int(progress_percent(done, total) / 10.0);
    if (tenths > tenths_logged_ && done < total) {
      tenths_logged_ = tenths;
      std::fprintf(out_, "%s\n", progress_line(snapshot(), step).c_str());
    }
  }
}

void Progress::end_line(const std::string& line) {
  open_ = false;
  if (terminal_)
    std::fprintf(out_, "\r\033[K%s\n", line.c_str());
  else if (verbose_)
    std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

void Progress::finish() {
  if (!open_) return;
  const ProgressSnapshot s = snapshot();
  if (done_ < total_)
    end_line(progress_stopped_line(s, "the work ended short of its total"));
  else
    end_line(progress_done_line(s));
}

void Progress::stop(const std::string& why) {
  if (!open_) return;
  end_line(progress_stopped_line(snapshot(), why));
}

}  // namespace eq::app
