#include "profile/trace.h"

#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <span>
#include <vector>

#include "core/error.h"
#include "core/hash.h"
#include "io/atomic_file.h"
#include "io/input_file.h"
#include "io/mapped_file.h"

namespace eq::profile {
namespace {

constexpr char kMagic[8] = {'E', 'Q', 'T', 'R', 'A', 'C', 'E', '2'};
// Traces written before the checksum trailer existed: refused with a message.
constexpr char kMagicV1[8] = {'E', 'Q', 'T', 'R', 'A', 'C', 'E', '1'};
// The layer field of the trailer block: u32 kTrailer | u32 0 | u64 XXH64 of
// every decompressed byte before the trailer.
constexpr uint32_t kTrailer = 0xFFFFFFFFu;

void put_u32(std::vector<uint8_t>& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(uint8_t(v >> (8 * i)));
}

uint32_t get_u32(const uint8_t* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24; }

}  // namespace

TraceWriter::TraceWriter(const std::string& path, int64_t num_experts, int64_t top_k, int level)
    : path_(path), tmp_path_(path + ".tmp"), top_k_(top_k) {
  if (num_experts > kMaxTraceExperts) unsupported("trace " + path + ": more than 65536 experts per layer");
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
  if (n) hash_.update(data, n);
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
  // Readers refuse blocks above kMaxTraceBlockSlots; a larger batch becomes
  // several blocks (tokens of one layer continue from its previous block).
  const int64_t max_tokens = std::max<int64_t>(1, int64_t(kMaxTraceBlockSlots) / std::max<int64_t>(1, top_k_));
  while (tokens > max_tokens) {
    write_block(layer, max_tokens, ids, gates);
    tokens -= max_tokens;
    ids += max_tokens * top_k_;
    gates += max_tokens * top_k_;
  }
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
  std::vector<uint8_t> t;
  put_u32(t, kTrailer);
  put_u32(t, 0);
  const uint64_t h = hash_.digest();
  for (int i = 0; i < 8; ++i) t.push_back(uint8_t(h >> (8 * i)));
  push(t.data(), t.size(), true);
  const int fd = fd_;
  fd_ = -1;
  io::commit_file(fd, tmp_path_, path_);
  finished_ = true;
}

namespace {

// The decompressed trace stream, pulled in order: straight from the mapping
// (a raw trace) or through a streaming zstd decoder (a .zst trace), so the
// reader holds one block at a time, never the whole decompressed trace.
class TraceSource {
 public:
  TraceSource(std::span<const uint8_t> bytes, const std::string& label) : label_(label), bytes_(bytes) {
    zstd_ = bytes.size() >= 4 && std::memcmp(bytes.data(), "\x28\xb5\x2f\xfd", 4) == 0;
    if (zstd_) {
      ds_ = ZSTD_createDStream();
      if (!ds_) fail(ErrorKind::kResource, label + ": cannot allocate a zstd decoder");
      in_ = {bytes.data(), bytes.size(), 0};
    }
  }
  ~TraceSource() {
    if (ds_) ZSTD_freeDStream(ds_);
  }
  TraceSource(const TraceSource&) = delete;
  TraceSource& operator=(const TraceSource&) = delete;

  // Bytes certainly left: exact for a raw trace; 0 for zstd (unknown until decoded).
  uint64_t known_left() const { return zstd_ ? 0 : bytes_.size() - raw_at_; }
  bool size_known() const { return !zstd_; }

  // Copies up to n bytes to dst; fewer only at the end of the data. Throws on
  // corrupt or truncated zstd data.
  size_t read(uint8_t* dst, size_t n) {
    size_t got = 0;
    if (!zstd_) {
      got = size_t(std::min<uint64_t>(n, bytes_.size() - raw_at_));
      if (got) std::memcpy(dst, bytes_.data() + raw_at_, got);
      raw_at_ += got;
    } else {
      while (got < n) {
        if (in_.pos == in_.size && last_ == 0) break;  // every frame decoded and flushed
        ZSTD_outBuffer out{dst + got, n - got, 0};
        const size_t before = in_.pos;
        last_ = ZSTD_decompressStream(ds_, &out, &in_);
        if (ZSTD_isError(last_)) invalid(label_ + ": corrupt zstd data: " + ZSTD_getErrorName(last_));
        got += out.pos;
        if (in_.pos == in_.size && in_.pos == before && out.pos == 0) {
          if (last_ != 0) invalid(label_ + ": truncated zstd data");
          break;
        }
      }
    }
    hash_.update(dst, got);
    offset_ += got;
    return got;
  }
  uint64_t offset() const { return offset_; }
  uint64_t digest() const { return hash_.digest(); }

 private:
  std::string label_;
  std::span<const uint8_t> bytes_;
  bool zstd_ = false;
  uint64_t raw_at_ = 0, offset_ = 0;
  ZSTD_DStream* ds_ = nullptr;
  ZSTD_inBuffer in_{nullptr, 0, 0};
  size_t last_ = 0;
  Xxhash64 hash_;
};

}  // namespace

TraceHeader read_trace(const std::string& path,
                       const std::function<void(int64_t, int64_t, const int32_t*, const float*)>& on_block) {
  return read_trace(path, nullptr, on_block);
}

TraceHeader read_trace(const std::string& path, const std::function<void(const TraceHeader&)>& on_header,
                       const std::function<void(int64_t, int64_t, const int32_t*, const float*)>& on_block) {
  const io::MappedFile file(path);
  return read_trace_bytes({file.data(), size_t(file.size())}, "trace " + path, on_header, on_block);
}

TraceHeader read_trace_bytes(std::span<const uint8_t> bytes, const std::string& label,
                             const std::function<void(const TraceHeader&)>& on_header,
                             const std::function<void(int64_t, int64_t, const int32_t*, const float*)>& on_block) {
  TraceSource src(bytes, label);
  uint8_t head[16];
  const size_t head_bytes = src.read(head, 16);
  if (head_bytes >= 8 && std::memcmp(head, kMagicV1, 8) == 0)
    invalid(label + ": a version 1 routing trace, written before traces carried a checksum; re-record it with "
                    "`expertquant profile --save-trace`");
  if (head_bytes < 16 || std::memcmp(head, kMagic, 8) != 0) invalid(label + ": not a routing trace (bad magic)");
  TraceHeader h;
  h.num_experts = get_u32(head + 8);
  h.top_k = get_u32(head + 12);
  if (h.top_k <= 0 || h.num_experts <= 0 || h.top_k > h.num_experts)
    invalid(label + ": header: bad num_experts/top_k");
  if (h.num_experts > kMaxTraceExperts)
    invalid(label + ": header: num_experts " + std::to_string(h.num_experts) + " exceeds " +
            std::to_string(kMaxTraceExperts) + " (expert ids are 16-bit)");
  if (on_header) on_header(h);
  std::vector<uint8_t> body;
  std::vector<int32_t> ids;
  std::vector<float> gates;
  for (;;) {
    const uint64_t at = src.offset();
    const uint64_t before = src.digest();
    uint8_t bh[8];
    const size_t got = src.read(bh, 8);
    if (got == 0)
      invalid(label + ": ends at byte " + std::to_string(at) + " without its checksum trailer (truncated, or not finished)");
    if (got < 8) invalid(label + ": truncated block header at byte " + std::to_string(at));
    if (get_u32(bh) == kTrailer) {
      uint8_t hb[8];
      if (src.read(hb, 8) < 8) invalid(label + ": truncated checksum trailer at byte " + std::to_string(at));
      uint64_t recorded = 0;
      for (int i = 0; i < 8; ++i) recorded |= uint64_t(hb[i]) << (8 * i);
      if (recorded != before)
        invalid(label + ": checksum " + hash_hex(before) + " of bytes 0-" + std::to_string(at) +
                " differs from the recorded " + hash_hex(recorded) + " (corrupt or edited trace)");
      uint8_t extra;
      if (src.read(&extra, 1) != 0) invalid(label + ": bytes after the checksum trailer at byte " + std::to_string(at));
      break;
    }
    const int64_t layer = get_u32(bh), tokens = get_u32(bh + 4);
    const uint64_t slots = uint64_t(tokens) * uint64_t(h.top_k);  // < 2^48: no wrap
    if (slots > kMaxTraceBlockSlots)
      fail(ErrorKind::kResource, label + ": block at byte " + std::to_string(at) + ": tokens " +
                                     std::to_string(tokens) + " x top_k " + std::to_string(h.top_k) +
                                     " exceeds the limit of " + std::to_string(kMaxTraceBlockSlots) + " slots per block");
    const uint64_t need = 6 * slots;
    if (src.size_known() && src.known_left() < need)
      invalid(label + ": truncated block at byte " + std::to_string(at) + ": tokens " + std::to_string(tokens) +
              " need " + std::to_string(need) + " bytes, " + std::to_string(src.known_left()) + " left");
    // A compressed trace's length is unknown until decoded: the buffer grows
    // only with bytes that actually arrived, so a block header claiming
    // billions of tokens costs nothing before its data is there.
    body.clear();
    while (body.size() < need) {
      const size_t have = body.size();
      const size_t want = size_t(std::min<uint64_t>(need, std::max<uint64_t>(2 * have, 1u << 16)));
      body.resize(want);
      const size_t n = src.read(body.data() + have, want - have);
      if (n < want - have)
        invalid(label + ": truncated block at byte " + std::to_string(at) + ": tokens " +
                std::to_string(tokens) + " need " + std::to_string(need) + " bytes, " + std::to_string(have + n) +
                " present");
    }
    ids.resize(slots);
    gates.resize(slots);
    const uint8_t* q = body.data();
    for (size_t i = 0; i < slots; ++i) {
      ids[i] = int32_t(q[2 * i]) | int32_t(q[2 * i + 1]) << 8;
      if (ids[i] >= h.num_experts)
        invalid(label + ": block at byte " + std::to_string(at) + ": expert id " + std::to_string(ids[i]) +
                " >= num_experts");
    }
    const uint8_t* planes = q + 2 * slots;
    for (size_t i = 0; i < slots; ++i) {
      const uint32_t bits = uint32_t(planes[i]) | uint32_t(planes[slots + i]) << 8 |
                            uint32_t(planes[2 * slots + i]) << 16 | uint32_t(planes[3 * slots + i]) << 24;
      std::memcpy(&gates[i], &bits, sizeof bits);
    }
    on_block(layer, tokens, ids.data(), gates.data());
  }
  h.xxh64 = src.digest();
  return h;
}

bool is_trace_file(const std::string& path) {
  // Only the first bytes are read: a safetensors file is never decompressed.
  io::InputFile in(path);
  char head[8] = {};
  const size_t got = in.read_full(head, 8);
  if (got < 4) return false;
  const unsigned char zstd_magic[4] = {0x28, 0xb5, 0x2f, 0xfd};
  if (std::memcmp(head, zstd_magic, 4) == 0) return true;  // a compressed trace (the only .zst input here)
  return got == 8 && (std::memcmp(head, kMagic, 8) == 0 || std::memcmp(head, kMagicV1, 8) == 0);
}

}  // namespace eq::profile
