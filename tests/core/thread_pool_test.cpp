#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/thread_pool.h"

namespace eq {
namespace {

TEST(ThreadPool, EveryChunkRunsOnce) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (size_t chunks : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}}) {
      std::vector<std::atomic<int>> hits(chunks);
      pool.run(chunks, [&](size_t i) { hits[i].fetch_add(1); });
      for (size_t i = 0; i < chunks; ++i) ASSERT_EQ(hits[i].load(), 1) << threads << " " << i;
    }
  }
}

TEST(ThreadPool, ParallelForCoversRangeAndIsRepeatable) {
  ThreadPool pool(2);
  std::vector<int> v(10007, 0);
  for (int rep = 0; rep < 50; ++rep)
    pool.parallel_for(v.size(), 64, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) v[i] += 1;
    });
  for (int x : v) ASSERT_EQ(x, 50);
}

TEST(ThreadPool, NestedRunExecutesInline) {
  ThreadPool pool(2);
  std::vector<std::atomic<int>> hits(64);
  pool.run(8, [&](size_t outer) {
    pool.run(8, [&](size_t inner) { hits[outer * 8 + inner].fetch_add(1); });
  });
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

// What a per-thread measurement relies on (quant/quantize_rate.cpp): inside a
// job of two or more chunks, a nested run's chunks all execute on the thread
// of the chunk that started it, however long they take.
TEST(ThreadPool, NestedRunStaysOnItsChunksThread) {
  ThreadPool pool(2);
  std::vector<std::atomic<int>> elsewhere(2);
  pool.run(2, [&](size_t outer) {
    const std::thread::id own = std::this_thread::get_id();
    pool.run(64, [&](size_t) {
      volatile double x = 0;
      for (int i = 0; i < 20000; ++i) x = x + 1.0;
      if (std::this_thread::get_id() != own) elsewhere[outer].fetch_add(1);
    });
  });
  EXPECT_EQ(elsewhere[0].load(), 0);
  EXPECT_EQ(elsewhere[1].load(), 0);
}

TEST(ThreadPool, ExceptionsReachTheCaller) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.run(100, [](size_t i) {
    if (i == 37) throw std::runtime_error("chunk 37");
  }),
               std::runtime_error);
  // The pool stays usable.
  std::atomic<int> n{0};
  pool.run(10, [&](size_t) { n++; });
  EXPECT_EQ(n.load(), 10);
}

}  // namespace
}  // namespace eq
