#include "option_checks.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "core/thread_pool.h"

namespace eq::app {
namespace {

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

CLI::Validator integer_in(int64_t lo, int64_t hi) {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        const std::string expected = "expected an integer in " + range + ", got '" + text + "'";
        if (text.empty()) return expected;
        errno = 0;
        char* end = nullptr;
        const long long v = std::strtoll(text.c_str(), &end, 10);
        if (end != text.c_str() + text.size() || errno == ERANGE || v < lo || v > hi) return expected;
        return {};
      },
      "INT in " + range);
}

CLI::Validator number_in(double lo, double hi, bool lo_open) {
  const std::string range =
      (lo_open ? "(" : "[") + number_text(lo) + ", " + (std::isinf(hi) ? std::string("inf)") : number_text(hi) + "]");
  return CLI::Validator(
      [lo, hi, lo_open, range](std::string& text) -> std::string {
        const std::string expected = "expected a finite number in " + range + ", got '" + text + "'";
        if (text.empty()) return expected;
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (end != text.c_str() + text.size() || !std::isfinite(v)) return expected;
        if (lo_open ? !(v > lo) : !(v >= lo)) return expected;
        if (!(v <= hi)) return expected;
        return {};
      },
      "NUMBER in " + range);
}

void add_threads_option(CLI::App* sub, int& threads) {
  sub->add_option("--threads", threads,
                  "Worker threads (default 0: one per core; more than the CPUs is lowered to their count)")
      ->check(integer_in(0, std::numeric_limits<int>::max()));
}

void apply_threads_option(int threads) {
  if (threads <= 0) return;  // the default pool: one per core
  const int cpus = hardware_threads();
  if (threads > cpus) {
    std::fprintf(stderr, "expertquant: note: --threads %d is more than the %d CPUs available; using %d\n", threads,
                 cpus, cpus);
    threads = cpus;
  }
  set_num_threads(threads);
}

}  // namespace eq::app
