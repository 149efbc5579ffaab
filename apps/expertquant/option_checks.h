// Range checks shared by every subcommand's numeric options. They are CLI11
// validators, so a bad value is refused while the command line is parsed,
// before anything is opened: "--top-p: expected a number in (0, 1], got '2'"
// (exit 2). Real-valued checks refuse NaN and infinities, which compare false
// against any bound and would otherwise pass.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace eq::app {

// An integer in [lo, hi].
CLI::Validator integer_in(int64_t lo, int64_t hi);
// A finite number in [lo, hi], or (lo, hi] when lo_open.
CLI::Validator number_in(double lo, double hi, bool lo_open = false);

// Bounds of the token and window counts (each far above any useful value, far
// below what would exhaust memory before the command could say why).
inline constexpr int64_t kMaxCtx = int64_t(1) << 20;
inline constexpr int64_t kMaxBatchWindows = 4096;
inline constexpr int64_t kMaxStepTokens = int64_t(1) << 16;  // a latency point M, a prefill, decode steps
inline constexpr int64_t kMaxTokensOption = int64_t(1) << 40;
inline constexpr int64_t kMaxRepetitions = 1'000'000;

// --threads N for a subcommand: 0 (default) = one per core.
void add_threads_option(CLI::App* sub, int& threads);
// Sizes the worker pool for --threads: the one place every command sets it.
// A count above the CPUs the process may run on is lowered to that count,
// with a note on stderr (more threads than CPUs only adds switching, and
// 100,000 of them exhaust the machine's process limit).
void apply_threads_option(int threads);

}  // namespace eq::app
