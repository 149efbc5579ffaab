#include "core/thread_pool.h"

#include <atomic>
#include <chrono>
#include <memory>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define EQ_CPU_RELAX() _mm_pause()
#else
#define EQ_CPU_RELAX() ((void)0)
#endif

namespace eq {

namespace {
// True while this thread executes chunks of a pool job. A nested run() from
// inside a chunk (e.g. a quantizer that threads over tiles, called by pack's
// per-expert tasks) then runs inline instead of deadlocking on the pool.
thread_local bool t_in_pool_job = false;

struct InJobScope {
  bool saved = t_in_pool_job;
  InJobScope() { t_in_pool_job = true; }
  ~InJobScope() { t_in_pool_job = saved; }
};
}  // namespace

// How long a waiting thread polls before it sleeps. Measured on the
// qwen3-30b-a3b decode layer (bench/moe_layer, M = 1, two threads): the two
// pool jobs per call (gate+up, down) otherwise start with the worker still
// asleep; docs/benchmarks-history.md "Changes of 2026-11-23 (commits 5ae1e08 to 0455729)".
constexpr int64_t kSpinMicros = 200;

template <class Done>
void ThreadPool::spin_until(const Done& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinMicros);
  while (std::chrono::steady_clock::now() < deadline)
    for (int i = 0; i < 64; ++i) {
      if (done()) return;
      EQ_CPU_RELAX();
    }
}

int hardware_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = hardware_threads();
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  cv_start_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::drain(const std::function<void(size_t)>* fn, size_t chunks) {
  InJobScope scope;
  for (;;) {
    size_t i = next_.fetch_add(1, std::memory_order_relaxed);
    if (i >= chunks) break;
    try {
      (*fn)(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::current_exception();
      next_.store(chunks, std::memory_order_relaxed);  // stop handing out work
    }
  }
}

void ThreadPool::worker_loop() {
  size_t seen = 0;
  for (;;) {
    const std::function<void(size_t)>* fn;
    size_t chunks;
    const auto started = [&] { return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen; };
    spin_until(started);
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_start_.wait(lock, started);
      if (stop_) return;
      seen = generation_;
      fn = job_;
      chunks = job_chunks_;
      ++busy_;
    }
    if (fn) drain(fn, chunks);  // null: woke after its job had already finished
    if (busy_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      // Taking the lock orders this notify after a run() that checked busy_
      // under it and is about to wait: no lost wake-up.
      std::lock_guard<std::mutex> lock(mu_);
      cv_done_.notify_all();
    }
  }
}

void ThreadPool::run(size_t chunks, const std::function<void(size_t)>& fn) {
  if (chunks == 0) return;
  if (workers_.empty() || chunks == 1 || t_in_pool_job) {
    for (size_t i = 0; i < chunks; ++i) fn(i);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    job_chunks_ = chunks;
    next_.store(0, std::memory_order_relaxed);
    error_ = nullptr;
    ++generation_;
  }
  cv_start_.notify_all();
  drain(&fn, chunks);
  std::exception_ptr err;
  const auto finished = [&] { return busy_.load(std::memory_order_acquire) == 0; };
  spin_until(finished);
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_done_.wait(lock, finished);
    // Workers that had not woken up yet for this generation will find no chunks left.
    job_ = nullptr;
    err = error_;
    error_ = nullptr;
  }
  if (err) std::rethrow_exception(err);
}

void ThreadPool::parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn) {
  if (n == 0) return;
  if (grain == 0) grain = 1;
  const size_t chunks = (n + grain - 1) / grain;
  run(chunks, [&](size_t c) {
    const size_t b = c * grain;
    fn(b, std::min(n, b + grain));
  });
}

namespace {
std::unique_ptr<ThreadPool>& pool_slot() {
  static std::unique_ptr<ThreadPool> pool;
  return pool;
}
}  // namespace

ThreadPool& default_pool() {
  auto& p = pool_slot();
  if (!p) p = std::make_unique<ThreadPool>(0);
  return *p;
}

void set_num_threads(int threads) { pool_slot() = std::make_unique<ThreadPool>(threads); }

}  // namespace eq
