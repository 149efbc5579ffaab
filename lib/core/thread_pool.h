// A small persistent thread pool. Work is split into fixed chunks handed out
// through an atomic counter (so a slow chunk never idles the other cores), and
// results never depend on which thread ran a chunk: callers write disjoint
// outputs or reduce per-chunk partials in chunk order, so every thread count
// gives bit-identical results.
#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace eq {

class ThreadPool {
 public:
  // threads <= 0: one per hardware core.
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(chunk_index) for chunk_index in [0, chunks), on all threads
  // including the caller; returns when all are done. Exceptions from fn are
  // rethrown (the first one) in the caller. A run() nested inside a chunk
  // executes its chunks inline on the calling thread.
  void run(size_t chunks, const std::function<void(size_t)>& fn);

  // Convenience: splits [0, n) into chunks of `grain` and calls fn(begin, end).
  void parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn);

 private:
  void worker_loop();
  // Polls done() for up to kSpinMicros before the caller blocks on a
  // condition variable: a decode step runs a pool job every few hundred
  // microseconds, and waking a sleeping thread costs tens of microseconds
  // (a futex wake, an IPI to an idle vCPU on a VM) each time.
  template <class Done>
  static void spin_until(const Done& done);
  void drain(const std::function<void(size_t)>* fn, size_t chunks);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_start_, cv_done_;
  const std::function<void(size_t)>* job_ = nullptr;
  size_t job_chunks_ = 0;
  // Atomic so that waiters can poll them before blocking (spin_until);
  // written under mu_ like the job fields they publish.
  std::atomic<size_t> generation_{0};
  std::atomic<size_t> busy_{0};
  std::atomic<bool> stop_{false};
  std::atomic<size_t> next_{0};
  std::exception_ptr error_;
};

// The process-wide pool used by lib/ (sized by set_num_threads, default all cores).
ThreadPool& default_pool();
void set_num_threads(int threads);
int hardware_threads();

}  // namespace eq
