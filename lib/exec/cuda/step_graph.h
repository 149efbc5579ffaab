// A decode step's GPU work replayed as one CUDA graph (`--device cuda`).
//
// At one token a decoder layer enqueues about 18 launches, each finished on
// the GPU sooner than the host issues the next, so a step is bound by issuing
// them (docs/benchmarks.md, "GPU whole model"). Once a step's buffers stand,
// its launches are the same at every position (the position is read from
// device memory), so they are captured once and each later step issues the
// graph: one call instead of hundreds.
//
// For each key (layers, batch), a step runs as it is when the key is new, its
// cache another or a DeviceBuffer was freed since the key's last step
// (device_buffers_freed: a captured address may be gone); it may then grow
// buffers, upload, make its router. The next step is captured and its graph
// launched (updating the key's earlier graph where the launches match), and
// later ones launch that graph. A capture that fails (a call in the step that
// cannot be captured) turns graphs off for this StepGraphs, and that step
// runs as it is.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <map>

namespace eq::exec::cuda {

class StepGraphs {
 public:
  enum class Ran { kAsIs, kCaptured, kReplayed };

  explicit StepGraphs(bool on) : on_(on) {}
  ~StepGraphs();
  StepGraphs(const StepGraphs&) = delete;
  StepGraphs& operator=(const StepGraphs&) = delete;

  bool on() const { return on_; }

  // Runs the step of layers [first, last) at `batch` rows on cache `cache`
  // (an id that no other cache had): `enqueue` puts its work on `stream`
  // (null: the thread's default stream) and returns a tally of it (the
  // caller's count, such as layers routed on the GPU), which *tally receives,
  // on a replay the captured step's.
  Ran run(int64_t first, int64_t last, int64_t batch, uint64_t cache, void* stream,
          const std::function<int64_t()>& enqueue, int64_t* tally);

 private:
  struct Key {
    int64_t first = 0, last = 0, batch = 0;
    auto operator<=>(const Key&) const = default;
  };
  struct Entry {
    uint64_t cache = 0, freed = 0;  // the cache and device_buffers_freed() of the last step
    bool warm = false;              // the last step ran with them
    void* exec = nullptr;           // cudaGraphExec_t, captured with them when `current`
    bool current = false;
    int64_t tally = 0;
  };
  // The step captured and its graph instantiated (or `e`'s updated) and
  // launched; false (graphs off) when the capture fails.
  bool capture(Entry& e, void* stream, const std::function<int64_t()>& enqueue);
  void launch(const Entry& e, void* stream);

  bool on_;
  std::map<Key, Entry> entries_;
};

}  // namespace eq::exec::cuda
