#include "io/text_file.h"

#include <zstd.h>

#include <cstring>

#include "core/error.h"
#include "io/mapped_file.h"

namespace eq::io {

std::vector<uint8_t> zstd_compress(const void* data, size_t n, int level) {
  std::vector<uint8_t> out(ZSTD_compressBound(n));
  size_t r = ZSTD_compress(out.data(), out.size(), data, n, level);
  if (ZSTD_isError(r)) fail(ErrorKind::kInternal, std::string("zstd compression failed: ") + ZSTD_getErrorName(r));
  out.resize(r);
  return out;
}

std::vector<uint8_t> zstd_decompress(const void* data, size_t n, const std::string& label, uint64_t max_bytes) {
  // Streaming decompression: works whether or not the frame records its size,
  // and enforces max_bytes without trusting the header.
  ZSTD_DStream* ds = ZSTD_createDStream();
  if (!ds) fail(ErrorKind::kResource, label + ": cannot allocate a zstd decoder");
  std::vector<uint8_t> out;
  std::vector<uint8_t> buf(ZSTD_DStreamOutSize());
  ZSTD_inBuffer in{data, n, 0};
  size_t last = 1;  // 0 once a frame is complete and fully flushed
  while (in.pos < in.size || last != 0) {
    ZSTD_outBuffer ob{buf.data(), buf.size(), 0};
    const size_t before = in.pos;
    last = ZSTD_decompressStream(ds, &ob, &in);
    if (ZSTD_isError(last)) {
      std::string msg = ZSTD_getErrorName(last);
      ZSTD_freeDStream(ds);
      invalid(label + ": corrupt zstd data: " + msg);
    }
    out.insert(out.end(), buf.data(), buf.data() + ob.pos);
    if (out.size() > max_bytes) {
      ZSTD_freeDStream(ds);
      fail(ErrorKind::kResource, label + ": decompresses to more than " + std::to_string(max_bytes) + " bytes");
    }
    // Input exhausted, frame unfinished and nothing produced: the data ends early.
    if (last != 0 && in.pos == in.size && in.pos == before && ob.pos == 0) break;
  }
  ZSTD_freeDStream(ds);
  if (last != 0) invalid(label + ": truncated zstd data");
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

}  // namespace eq::io
