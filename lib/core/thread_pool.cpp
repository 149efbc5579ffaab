#include "core/thread_pool.h"

#include <atomic>
#include <memory>

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
    stop_ = true;
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
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      fn = job_;
      chunks = job_chunks_;
      ++busy_;
    }
    if (fn) drain(fn, chunks);  // null: woke after its job had already finished
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--busy_ == 0) cv_done_.notify_all();
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
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_done_.wait(lock, [&] { return busy_ == 0; });
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
