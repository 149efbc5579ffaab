#include "io/text_file.h"

#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>

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
  fail(ErrorKind::kResource, path + ": text larger than the limit of " + std::to_string(cap) + " bytes");
}

}  // namespace

struct TextReader::Zstd {
  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> d{ZSTD_createDCtx(), ZSTD_freeDCtx};
  std::vector<unsigned char> buf;
  ZSTD_inBuffer in{nullptr, 0, 0};
  bool eof = false;
  size_t last = 1;  // 0 once a frame is complete and flushed
};

TextReader::TextReader(const std::string& path) : in_(std::make_unique<InputFile>(path)) {
  head_bytes_ = in_->read_full(head_, sizeof head_);
  if (head_bytes_ >= 4 && std::memcmp(head_, kZstdMagic, 4) == 0) {
    zstd_ = std::make_unique<Zstd>();
    if (!zstd_->d) fail(ErrorKind::kResource, path + ": cannot allocate a zstd decoder");
    zstd_->buf.resize(std::max<size_t>(ZSTD_DStreamInSize(), head_bytes_));
    std::memcpy(zstd_->buf.data(), head_, head_bytes_);
    zstd_->in = {zstd_->buf.data(), head_bytes_, 0};
    const unsigned long long declared = ZSTD_getFrameContentSize(head_, head_bytes_);
    if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != ZSTD_CONTENTSIZE_ERROR) declared_ = declared;
  } else {
    declared_ = in_->size();
  }
}

TextReader::~TextReader() = default;

const std::string& TextReader::path() const { return in_->path(); }

size_t TextReader::read(std::string& out, size_t n) {
  const size_t old = out.size();
  out.resize(old + n);
  const size_t got = zstd_ ? read_zstd(out.data() + old, n) : read_plain(out.data() + old, n);
  out.resize(old + got);
  return got;
}

size_t TextReader::read_plain(char* dst, size_t n) {
  size_t got = 0;
  if (head_used_ < head_bytes_) {
    got = std::min(n, head_bytes_ - head_used_);
    std::memcpy(dst, head_ + head_used_, got);
    head_used_ += got;
  }
  while (got < n) {
    const size_t r = in_->read(dst + got, n - got);
    if (r == 0) break;
    got += r;
  }
  return got;
}

// Fills up to n bytes; fewer only at the end of the content.
size_t TextReader::read_zstd(char* dst, size_t n) {
  Zstd& z = *zstd_;
  size_t got = 0;
  while (got < n) {
    if (z.in.pos == z.in.size && !z.eof) {
      const size_t r = in_->read(z.buf.data(), z.buf.size());
      z.in = {z.buf.data(), r, 0};
      z.eof = r == 0;
    }
    ZSTD_outBuffer zout{dst + got, n - got, 0};
    const size_t before = z.in.pos;
    const size_t r = ZSTD_decompressStream(z.d.get(), &zout, &z.in);
    if (ZSTD_isError(r)) invalid(path() + ": corrupt zstd data: " + ZSTD_getErrorName(r));
    got += zout.pos;
    if (zout.pos != 0 || z.in.pos != before) {
      z.last = r;
      continue;
    }
    // No progress: the file is consumed and the decoder has nothing left to
    // flush; the text ends well only after a complete frame.
    if (!z.eof || z.in.pos != z.in.size) invalid(path() + ": corrupt zstd data (decoder stalled)");
    if (z.last != 0) invalid(path() + ": truncated zstd data");
    break;
  }
  return got;
}

uint64_t TextReader::hash_rest(uint64_t* bytes) {
  std::string chunk;
  uint64_t n = 0;
  while (true) {
    chunk.clear();
    if (read(chunk, kTextChunk) == 0) break;
    hash_.update(chunk.data(), chunk.size());
    n += chunk.size();
  }
  if (bytes) *bytes += n;
  return hash_.digest();
}

uint64_t text_content_xxh64(const std::string& path) { return TextReader(path).hash_rest(nullptr); }

uint64_t text_content_size(const std::string& path, uint64_t stop_after) {
  TextReader r(path);
  // A zstd frame's size is a lower bound: more frames may follow it.
  if (r.declared_size() && (!r.compressed() || *r.declared_size() > stop_after)) return *r.declared_size();
  std::string chunk;
  uint64_t n = 0;
  while (n <= stop_after) {
    chunk.clear();
    const size_t got = r.read(chunk, kTextChunk);
    if (got == 0) break;
    n += got;
  }
  return n;
}

std::string read_text_prefix(const std::string& path, uint64_t want, uint64_t cap) {
  TextReader in(path);
  // Reading whole (or past the cap): one byte more than the cap tells that it is over.
  const bool whole = want == 0 || want > cap;
  const uint64_t target = whole ? cap + 1 : want;
  if (whole && in.declared_size() && *in.declared_size() > cap) text_too_large(path, cap);
  std::string out;
  if (in.declared_size()) out.reserve(size_t(std::min(target, *in.declared_size())));
  while (out.size() < target && in.read(out, size_t(std::min<uint64_t>(kTextChunk, target - out.size()))) != 0) {
  }
  if (whole && out.size() > cap) text_too_large(path, cap);
  return out;
}

}  // namespace eq::io
