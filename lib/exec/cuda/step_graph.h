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
// state another (the cache, the layers' expert weights) or a DeviceBuffer was
// freed since the key's last step (device_buffers_freed: a captured address
// may be gone); it may then grow buffers, upload, make its router. The next
// step is captured and its graph launched (updating the key's earlier graph
// where the launches match), and later ones launch that graph. A capture that
// fails (a call in the step that cannot be captured) turns graphs off for
// this StepGraphs, and that step runs as it is.
//
// A capture assumes no other thread makes a MoE call while it runs: the
// dispatches' shared lane streams (device_moe.h) join the capture until it
// ends, so such a call would land in the graph (expertquant's commands run
// one forward at a time).
//
// The captured products of cuBLAS use the workspace of the capturing
// thread's handle (kept for the process's life), so a graph is replayed only
// on the thread that captured it: another thread's step runs as it is, and
// its next one is captured again.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <thread>
#include <vector>

namespace eq::exec::cuda {

class StepGraphs {
 public:
  enum class Ran { kAsIs, kCaptured, kReplayed };

  explicit StepGraphs(bool on) : on_(on) {}
  ~StepGraphs();
  StepGraphs(const StepGraphs&) = delete;
  StepGraphs& operator=(const StepGraphs&) = delete;

  bool on() const { return on_; }

  // Runs the step of layers [first, last) at `batch` rows in `state` (ids of
  // what the step reads besides its buffers, none ever another's: its cache,
  // its layers' expert weights): `enqueue` puts its work on `stream` (null:
  // the thread's default stream) and returns a tally of it (the caller's
  // count, such as layers routed on the GPU), which *tally receives, on a
  // replay the captured step's.
  Ran run(int64_t first, int64_t last, int64_t batch, const std::vector<uint64_t>& state, void* stream,
          const std::function<int64_t()>& enqueue, int64_t* tally);

 private:
  struct Key {
    int64_t first = 0, last = 0, batch = 0;
    auto operator<=>(const Key&) const = default;
  };
  struct Entry {
    std::vector<uint64_t> state;  // the last step's
    std::thread::id thread;       // and its thread
    uint64_t freed = 0;           // device_buffers_freed() after the last step
    bool warm = false;              // the last step ran with them
    void* exec = nullptr;           // cudaGraphExec_t, captured with them when `current`
    bool current = false;
    int64_t tally = 0;
  };
  // The step captured and its graph instantiated (or `e`'s updated) and
  // launched; false when it was not (graphs off when the capture failed).
  bool capture(Entry& e, void* stream, const std::function<int64_t()>& enqueue);
  // Launches e's graph unless a buffer was freed since it was captured.
  bool launch(const Entry& e, void* stream);

  bool on_;
  std::map<Key, Entry> entries_;
};

}  // namespace eq::exec::cuda
