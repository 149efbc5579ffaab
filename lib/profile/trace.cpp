#include "profile/trace.h"

#include <unistd.h>
#include <zstd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/text_file.h"

namespace eq::profile {
namespace {

constexpr char kMagic[8] = {'E', 'Q', 'T', 'R', 'A', 'C', 'E', '1'};

void put_u32(std::vector<uint8_t>& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(uint8_t(v >> (8 * i)));
}

uint32_t get_u32(const uint8_t* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24; }

}  // namespace

TraceWriter::TraceWriter(const std::string& path, int64_t num_experts, int64_t top_k, int level)
    : path_(path), tmp_path_(path + ".tmp"), top_k_(top_k) {
  if (num_experts > 65536) unsupported("trace " + path + ": more than 65536 experts per layer");
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  fd_ = io::create_file(tmp_path_);
  ZSTD_CCtx* c = ZSTD_createCCtx();
  if (!c) fail(ErrorKind::kResource, "trace " + path + ": cannot create a zstd context");
  ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level);
  cctx_ = c;
  std::vector<uint8_t> h(kMagic, kMagic + 8);
  put_u32(h, uint32_t(num_experts));
  put_u32(h, uint32_t(top_k));
  push(h.data(), h.size(), false);
}

TraceWriter::~TraceWriter() {
  if (cctx_) ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(cctx_));
  if (!finished_ && fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_path_.c_str());
  }
}

void TraceWriter::push(const void* data, size_t n, bool end) {
  raw_bytes_ += n;
  ZSTD_CCtx* c = static_cast<ZSTD_CCtx*>(cctx_);
  std::vector<uint8_t> out(ZSTD_CStreamOutSize());
  ZSTD_inBuffer in{data, n, 0};
  for (;;) {
    ZSTD_outBuffer ob{out.data(), out.size(), 0};
    const size_t rc = ZSTD_compressStream2(c, &ob, &in, end ? ZSTD_e_end : ZSTD_e_continue);
    if (ZSTD_isError(rc)) fail(ErrorKind::kIo, "trace " + path_ + ": zstd: " + ZSTD_getErrorName(rc));
    io::write_all(fd_, out.data(), ob.pos, tmp_path_);
    compressed_bytes_ += ob.pos;
    if (end ? rc == 0 : in.pos == in.size) break;
  }
}

void TraceWriter::write_block(int64_t layer, int64_t tokens, const int32_t* ids, const float* gates) {
  std::vector<uint8_t> b;
  b.reserve(8 + tokens * top_k_ * 6);
  put_u32(b, uint32_t(layer));
  put_u32(b, uint32_t(tokens));
  for (int64_t i = 0; i < tokens * top_k_; ++i) {
    const uint16_t v = uint16_t(ids[i]);
    b.push_back(uint8_t(v));
    b.push_back(uint8_t(v >> 8));
  }
  // Gates as 4 byte planes (all low bytes, ..., all sign/exponent bytes):
  // the high bytes of weights in [0, 1] repeat, and zstd finds that only
  // when they sit together.
  const size_t slots = size_t(tokens * top_k_), at = b.size();
  b.resize(at + slots * sizeof(float));
  for (size_t i = 0; i < slots; ++i) {
    uint32_t bits;
    std::memcpy(&bits, gates + i, sizeof bits);
    for (size_t k = 0; k < 4; ++k) b[at + k * slots + i] = uint8_t(bits >> (8 * k));
  }
  push(b.data(), b.size(), false);
}

void TraceWriter::finish() {
  push(nullptr, 0, true);
  const int fd = fd_;
  fd_ = -1;
  io::commit_file(fd, tmp_path_, path_);
  finished_ = true;
}

TraceHeader read_trace(const std::string& path,
                       const std::function<void(int64_t, int64_t, const int32_t*, const float*)>& on_block) {
  const std::string bytes = io::read_file_bytes(path);
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t n = bytes.size();
  if (n < 16 || std::memcmp(p, kMagic, 8) != 0) invalid("trace " + path + ": not a routing trace (bad magic)");
  TraceHeader h;
  h.num_experts = get_u32(p + 8);
  h.top_k = get_u32(p + 12);
  if (h.top_k <= 0 || h.num_experts <= 0 || h.top_k > h.num_experts)
    invalid("trace " + path + ": header: bad num_experts/top_k");
  size_t at = 16;
  std::vector<int32_t> ids;
  std::vector<float> gates;
  while (at < n) {
    if (n - at < 8) invalid("trace " + path + ": truncated block header at byte " + std::to_string(at));
    const int64_t layer = get_u32(p + at), tokens = get_u32(p + at + 4);
    const size_t slots = size_t(tokens) * size_t(h.top_k);
    if ((n - at - 8) / 6 < slots) invalid("trace " + path + ": truncated block at byte " + std::to_string(at));
    ids.resize(slots);
    gates.resize(slots);
    const uint8_t* q = p + at + 8;
    for (size_t i = 0; i < slots; ++i) {
      ids[i] = int32_t(q[2 * i]) | int32_t(q[2 * i + 1]) << 8;
      if (ids[i] >= h.num_experts)
        invalid("trace " + path + ": block at byte " + std::to_string(at) + ": expert id " + std::to_string(ids[i]) +
                " >= num_experts");
    }
    const uint8_t* planes = q + 2 * slots;
    for (size_t i = 0; i < slots; ++i) {
      const uint32_t bits = uint32_t(planes[i]) | uint32_t(planes[slots + i]) << 8 |
                            uint32_t(planes[2 * slots + i]) << 16 | uint32_t(planes[3 * slots + i]) << 24;
      std::memcpy(&gates[i], &bits, sizeof bits);
    }
    on_block(layer, tokens, ids.data(), gates.data());
    at += 8 + 6 * slots;
  }
  return h;
}

bool is_trace_file(const std::string& path) {
  // Only the first bytes are read: a safetensors file is never decompressed.
  std::ifstream in(path, std::ios::binary);
  char head[8] = {};
  in.read(head, 8);
  if (in.gcount() < 4) return false;
  const unsigned char zstd_magic[4] = {0x28, 0xb5, 0x2f, 0xfd};
  if (std::memcmp(head, zstd_magic, 4) == 0) return true;  // a compressed trace (the only .zst input here)
  return in.gcount() == 8 && std::memcmp(head, kMagic, 8) == 0;
}

}  // namespace eq::profile
