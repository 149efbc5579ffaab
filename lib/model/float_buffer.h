// float32 buffers aligned to 64 bytes. Eigen's vectorized loops pick their
// prologue by pointer alignment, so the same data at a differently aligned
// address can be summed in a different order; with every buffer of the
// forward pass 64-byte aligned, the offsets the kernels see depend only on the
// problem shape, and results are bit-identical run to run and for any thread
// count.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace eq::model {

template <typename T>
struct Aligned64Allocator {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};
  Aligned64Allocator() = default;
  template <typename U>
  Aligned64Allocator(const Aligned64Allocator<U>&) noexcept {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlign)); }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, kAlign); }
  template <typename U>
  bool operator==(const Aligned64Allocator<U>&) const noexcept {
    return true;
  }
};

using FloatBuffer = std::vector<float, Aligned64Allocator<float>>;

}  // namespace eq::model
