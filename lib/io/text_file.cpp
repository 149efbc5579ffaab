#include "io/text_file.h"

#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "core/error.h"
#include "io/input_file.h"
#include "io/mapped_file.h"

namespace eq::io {

std::vector<uint8_t> zstd_compress(const void* data, size_t n, int level) {
  std::vector<uint8_t> out(ZSTD_compressBound(n));
  size_t r = ZSTD_compress(out.data(), out.size(), data, n, level);
  if (ZSTD_isError(r)) fail(ErrorKind::kInternal, std::string("zstd compression failed: ") + ZSTD_getErrorName(r));
  out.resize(r);
  return out;
}

namespace {

// One decoder per thread, reused: creating a decoder (and its window buffers)
// for every call cost more than decoding a small frame. A decoder left with
// large buffers (a frame with a big window) is freed after use, so no thread
// keeps them.
class ThreadDecoder {
 public:
  ThreadDecoder() {
    thread_local Slot slot;
    slot_ = &slot;
    if (!slot.d) slot.d = ZSTD_createDCtx();
    if (slot.d) ZSTD_DCtx_reset(slot.d, ZSTD_reset_session_only);
  }
  ~ThreadDecoder() {
    if (slot_->d && ZSTD_sizeof_DCtx(slot_->d) > kKeepBytes) {
      ZSTD_freeDCtx(slot_->d);
      slot_->d = nullptr;
    }
  }
  ThreadDecoder(const ThreadDecoder&) = delete;
  ThreadDecoder& operator=(const ThreadDecoder&) = delete;
  ZSTD_DCtx* get() const { return slot_->d; }

 private:
  static constexpr size_t kKeepBytes = size_t(8) << 20;
  struct Slot {
    ZSTD_DCtx* d = nullptr;
    ~Slot() { ZSTD_freeDCtx(d); }
  };
  Slot* slot_;
};

}  // namespace

std::vector<uint8_t> zstd_decompress(const void* data, size_t n, const std::string& label, uint64_t max_bytes) {
  // Streaming decompression: works whether or not the frame records its size,
  // and enforces max_bytes without trusting the header. A first frame that
  // declares more than max_bytes is refused before decoding anything.
  const unsigned long long declared = ZSTD_getFrameContentSize(data, n);
  if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != ZSTD_CONTENTSIZE_ERROR && declared > max_bytes)
    fail(ErrorKind::kResource, label + ": declares " + std::to_string(declared) + " bytes, more than the limit of " +
                                   std::to_string(max_bytes));
  const ThreadDecoder decoder;
  ZSTD_DCtx* ds = decoder.get();
  if (!ds) fail(ErrorKind::kResource, label + ": cannot allocate a zstd decoder");
  // Decoded straight into `out`, which grows geometrically with the output
  // actually produced, up to max_bytes + 1 (one byte more = over the limit).
  const uint64_t cap = max_bytes + 1;
  std::vector<uint8_t> out(size_t(std::min<uint64_t>(cap, std::clamp<uint64_t>(4 * uint64_t(n), 4096, 1u << 20))));
  size_t produced = 0;
  ZSTD_inBuffer in{data, n, 0};
  size_t last = 1;  // 0 once a frame is complete and fully flushed
  while (in.pos < in.size || last != 0) {
    if (produced == out.size()) {
      if (produced > max_bytes)
        fail(ErrorKind::kResource, label + ": decompresses to more than " + std::to_string(max_bytes) + " bytes");
      out.resize(size_t(std::min<uint64_t>(cap, 2 * uint64_t(out.size()))));
    }
    ZSTD_outBuffer ob{out.data(), out.size(), produced};
    const size_t before = in.pos;
    last = ZSTD_decompressStream(ds, &ob, &in);
    if (ZSTD_isError(last)) invalid(label + ": corrupt zstd data: " + ZSTD_getErrorName(last));
    const bool progress = ob.pos != produced || in.pos != before;
    produced = ob.pos;
    if (produced > max_bytes)
      fail(ErrorKind::kResource, label + ": decompresses to more than " + std::to_string(max_bytes) + " bytes");
    // Input exhausted, frame unfinished and nothing produced: the data ends early.
    if (last != 0 && in.pos == in.size && !progress) break;
  }
  if (last != 0) invalid(label + ": truncated zstd data");
  out.resize(produced);
  return out;
}

std::string read_file_bytes(const std::string& path, uint64_t max_bytes) {
  MappedFile f(path);
  const bool zstd = f.size() >= 4 && std::memcmp(f.data(), "\x28\xb5\x2f\xfd", 4) == 0;
  if (zstd) {
    auto v = zstd_decompress(f.data(), f.size(), path, max_bytes);
    return std::string(v.begin(), v.end());
  }
  if (f.size() > max_bytes)
    fail(ErrorKind::kResource, path + ": " + std::to_string(f.size()) + " bytes exceeds the limit of " +
                                   std::to_string(max_bytes));
  return std::string(reinterpret_cast<const char*>(f.data()), f.size());
}

namespace {

constexpr unsigned char kZstdMagic[4] = {0x28, 0xb5, 0x2f, 0xfd};
constexpr size_t kTextChunk = size_t(1) << 20;

[[noreturn]] void text_too_large(const std::string& path, uint64_t cap) {
  fail(ErrorKind::kResource, path + ": text larger than the limit of " + std::to_string(cap) +
                                 " bytes (pass --max-tokens to read only its start)");
}

// Reads from `in` (whose first `head_bytes` bytes are already in `head`)
// until `target` bytes of content or the end of the file.
void read_plain(InputFile& in, const unsigned char* head, size_t head_bytes, uint64_t target, std::string& out) {
  out.reserve(size_t(std::min<uint64_t>(target, in.size())));
  out.append(reinterpret_cast<const char*>(head), size_t(std::min<uint64_t>(head_bytes, target)));
  while (out.size() < target) {
    const size_t old = out.size();
    const size_t room = size_t(std::min<uint64_t>(kTextChunk, target - old));
    out.resize(old + room);
    const size_t n = in.read(out.data() + old, room);
    out.resize(old + n);
    if (n == 0) break;
  }
}

void read_zstd(InputFile& in, const unsigned char* head, size_t head_bytes, uint64_t target, std::string& out) {
  const std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> d(ZSTD_createDCtx(), ZSTD_freeDCtx);
  if (!d) fail(ErrorKind::kResource, in.path() + ": cannot allocate a zstd decoder");
  std::vector<unsigned char> buf(std::max<size_t>(ZSTD_DStreamInSize(), head_bytes));
  std::memcpy(buf.data(), head, head_bytes);
  ZSTD_inBuffer zin{buf.data(), head_bytes, 0};
  bool eof = false;
  size_t last = 1;  // 0 once a frame is complete and flushed
  while (out.size() < target) {
    if (zin.pos == zin.size && !eof) {
      const size_t n = in.read(buf.data(), buf.size());
      zin = {buf.data(), n, 0};
      eof = n == 0;
    }
    const size_t old = out.size();
    const size_t room = size_t(std::min<uint64_t>(kTextChunk, target - old));
    out.resize(old + room);
    ZSTD_outBuffer zout{out.data() + old, room, 0};
    const size_t before = zin.pos;
    const size_t r = ZSTD_decompressStream(d.get(), &zout, &zin);
    out.resize(old + zout.pos);
    if (ZSTD_isError(r)) invalid(in.path() + ": corrupt zstd data: " + ZSTD_getErrorName(r));
    if (zout.pos != 0 || zin.pos != before) {
      last = r;
      continue;
    }
    // No progress: the file is consumed and the decoder has nothing left to
    // flush; the text ends well only after a complete frame.
    if (!eof || zin.pos != zin.size) invalid(in.path() + ": corrupt zstd data (decoder stalled)");
    if (last != 0) invalid(in.path() + ": truncated zstd data");
    break;
  }
}

}  // namespace

std::string read_text_prefix(const std::string& path, uint64_t want, uint64_t cap) {
  InputFile in(path);
  // Reading whole (or past the cap): one byte more than the cap tells that it is over.
  const bool whole = want == 0 || want > cap;
  const uint64_t target = whole ? cap + 1 : want;
  unsigned char head[32];
  const size_t head_bytes = in.read_full(head, sizeof head);
  std::string out;
  if (head_bytes >= 4 && std::memcmp(head, kZstdMagic, 4) == 0) {
    const unsigned long long declared = ZSTD_getFrameContentSize(head, head_bytes);
    if (whole && declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != ZSTD_CONTENTSIZE_ERROR && declared > cap)
      text_too_large(path, cap);
    read_zstd(in, head, head_bytes, target, out);
  } else {
    if (whole && in.size() > cap) text_too_large(path, cap);
    read_plain(in, head, head_bytes, target, out);
  }
  if (whole && out.size() > cap) text_too_large(path, cap);
  return out;
}

}  // namespace eq::io
