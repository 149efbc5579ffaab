// Routing trace reader on hostile and large inputs: claims are checked before
// anything is sized from them, a compressed trace is read one block at a time
// (never decompressed whole), blocks above the limit are split by the writer,
// and the stream's hash is the hash of the decompressed bytes.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/build_info.h"
#include "core/error.h"
#include "core/hash.h"
#include "io/text_file.h"
#include "model/config.h"
#include "profile/run.h"
#include "profile/trace.h"
#include "test_support.h"

namespace eq::profile {
namespace {

void put_u32(std::vector<uint8_t>& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(uint8_t(v >> (8 * i)));
}

std::vector<uint8_t> trace_header(uint32_t num_experts, uint32_t top_k) {
  std::vector<uint8_t> b = {'E', 'Q', 'T', 'R', 'A', 'C', 'E', '2'};
  put_u32(b, num_experts);
  put_u32(b, top_k);
  return b;
}

// Appends the checksum trailer a finished trace ends with.
std::vector<uint8_t> with_trailer(std::vector<uint8_t> b) {
  const uint64_t h = xxhash64(b.data(), b.size());
  put_u32(b, 0xffffffffu);
  put_u32(b, 0);
  for (int i = 0; i < 8; ++i) b.push_back(uint8_t(h >> (8 * i)));
  return b;
}

// Reads `bytes` (raw or zstd); returns the error's kind and message (kind 0: accepted).
std::pair<int, std::string> read_error(const std::vector<uint8_t>& bytes) {
  try {
    read_trace_bytes(bytes, "trace t.zst", nullptr, [](int64_t, int64_t, const int32_t*, const float*) {});
  } catch (const Error& e) {
    return {int(e.kind()), e.what()};
  }
  return {0, ""};
}

int64_t peak_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

TEST(TraceReader, BlockClaimAboveTheLimitIsRefusedBeforeReading) {
  std::vector<uint8_t> b = trace_header(8, 2);
  put_u32(b, 0);
  put_u32(b, 0xffffffffu);  // 2^32 - 1 tokens x top-2: 48 GiB of ids and gates claimed by 8 bytes
  for (const auto& bytes : {b, io::zstd_compress(b.data(), b.size())}) {
    const auto [kind, msg] = read_error(bytes);
    EXPECT_EQ(kind, int(ErrorKind::kResource)) << msg;
    EXPECT_NE(msg.find("trace t.zst: block at byte 16: tokens 4294967295 x top_k 2 exceeds the limit of 16777216"),
              std::string::npos)
        << msg;
  }
}

TEST(TraceReader, CompressedBlockClaimGrowsOnlyWithTheBytesPresent) {
  // Within the per-block limit (2^23 tokens x 2 = 2^24 slots, 96 MiB) but only
  // 600 bytes of the block follow: a compressed trace's length is unknown, so
  // the reader must find the end of the data, not allocate the claim.
  std::vector<uint8_t> b = trace_header(8, 2);
  put_u32(b, 3);
  put_u32(b, 1u << 23);
  b.resize(b.size() + 600, 0);
  const auto [kind, msg] = read_error(io::zstd_compress(b.data(), b.size()));
  EXPECT_EQ(kind, int(ErrorKind::kInvalidInput)) << msg;
  EXPECT_NE(msg.find("trace t.zst: truncated block at byte 16: tokens 8388608 need 100663296 bytes, 600 present"),
            std::string::npos)
      << msg;
  // Raw: the bytes left are known, so the claim is refused up front.
  const auto [raw_kind, raw_msg] = read_error(b);
  EXPECT_EQ(raw_kind, int(ErrorKind::kInvalidInput)) << raw_msg;
  EXPECT_NE(raw_msg.find("truncated block at byte 16: tokens 8388608 need 100663296 bytes, 600 left"),
            std::string::npos)
      << raw_msg;
}

TEST(TraceReader, HeaderChecks) {
  EXPECT_NE(read_error(trace_header(70000, 2)).second.find("num_experts 70000 exceeds 65536"), std::string::npos);
  EXPECT_NE(read_error(trace_header(4, 5)).second.find("bad num_experts/top_k"), std::string::npos);
  EXPECT_NE(read_error({'E', 'Q', 'T'}).second.find("bad magic"), std::string::npos);
  std::vector<uint8_t> b = trace_header(4, 2);
  put_u32(b, 0);
  const auto [kind, msg] = read_error(b);  // 4 of the 8 bytes of a block header
  EXPECT_NE(msg.find("truncated block header at byte 16"), std::string::npos) << msg;
  // A truncated zstd frame (the stream's last 5 bytes cut) of 500 valid empty blocks.
  std::vector<uint8_t> z = trace_header(4, 2);
  for (int i = 0; i < 500; ++i) {
    put_u32(z, uint32_t(i * 2654435761u));
    put_u32(z, 0);
  }
  z = with_trailer(z);
  ASSERT_EQ(read_error(io::zstd_compress(z.data(), z.size())).first, 0);
  z = io::zstd_compress(z.data(), z.size());
  ASSERT_GT(z.size(), 5u);
  z.erase(z.end() - 5, z.end());  // (not resize: GCC's -Wstringop-overflow misreads it under ASan)
  EXPECT_NE(read_error(z).second.find("trace t.zst: truncated zstd data"), std::string::npos);
}

// The trailer's checksum covers every byte before it: a changed gate, a
// missing trailer or a version 1 trace (no checksum) is refused by name.
TEST(TraceReader, ChecksumTrailerIsVerified) {
  std::vector<uint8_t> b = trace_header(4, 2);
  put_u32(b, 1);
  put_u32(b, 1);
  for (uint8_t v : {0, 0, 3, 0}) b.push_back(v);            // ids 0, 3
  for (int i = 0; i < 8; ++i) b.push_back(uint8_t(i * 7));  // gate byte planes
  const std::vector<uint8_t> good = with_trailer(b);
  EXPECT_EQ(read_error(good).first, 0) << read_error(good).second;
  std::vector<uint8_t> edited = good;
  edited[16 + 8 + 4 + 2] ^= 0x40;  // a gate byte
  auto [kind, msg] = read_error(edited);
  EXPECT_EQ(kind, int(ErrorKind::kInvalidInput)) << msg;
  EXPECT_NE(msg.find("trace t.zst: checksum "), std::string::npos) << msg;
  EXPECT_NE(msg.find("differs from the recorded"), std::string::npos) << msg;
  EXPECT_NE(read_error(b).second.find("trace t.zst: ends at byte 36 without its checksum trailer"), std::string::npos)
      << read_error(b).second;
  std::vector<uint8_t> v1 = good;
  v1[7] = '1';
  EXPECT_NE(read_error(v1).second.find("version 1 routing trace"), std::string::npos) << read_error(v1).second;
  std::vector<uint8_t> trailing = good;
  trailing.push_back(0);
  EXPECT_NE(read_error(trailing).second.find("bytes after the checksum trailer"), std::string::npos);
}

// A trace file edited on disk is refused naming the file.
TEST(TraceReader, EditedTraceFileIsRefusedNamingIt) {
  const auto dir = test::temp_dir("trace_checksum");
  const std::string path = (dir / "t.trace").string();
  {
    TraceWriter w(path, 16, 4);
    const std::vector<int32_t> ids = {1, 2, 3, 4, 5, 6, 7, 8};
    const std::vector<float> gates(8, 0.25f);
    w.write_block(0, 2, ids.data(), gates.data());
    w.finish();
  }
  const std::vector<uint8_t> z = [&] {
    std::ifstream in(path, std::ios::binary);
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }();
  std::vector<uint8_t> raw = io::zstd_decompress(z.data(), z.size(), path);
  raw[16 + 8] ^= 1;  // the first expert id 1 -> 0: still a valid block
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(raw.data()), std::streamsize(raw.size()));
  }
  try {
    read_trace(path, [](int64_t, int64_t, const int32_t*, const float*) {});
    ADD_FAILURE() << "an edited trace was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("trace " + path + ": checksum"), std::string::npos) << e.what();
  }
}

// The header callback runs before any block, so a caller can refuse a trace of
// other dims before its ids reach per-expert tables.
TEST(TraceReader, HeaderCallbackRunsBeforeTheFirstBlock) {
  const auto dir = test::temp_dir("trace_header");
  const std::string path = (dir / "t.zst").string();
  {
    TraceWriter w(path, 16, 4);
    const std::vector<int32_t> ids(8, 15);
    const std::vector<float> gates(8, 0.25f);
    w.write_block(0, 2, ids.data(), gates.data());
    w.finish();
  }
  int blocks = 0;
  EXPECT_THROW(read_trace(
                   path, [](const TraceHeader& h) { if (h.num_experts != 8) invalid("other dims"); },
                   [&](int64_t, int64_t, const int32_t*, const float*) { ++blocks; }),
               Error);
  EXPECT_EQ(blocks, 0);
}

// `profile --router-logits` with a trace of a model with more experts: refused
// from the trace header, before any block's ids (up to 2 x the model's experts
// here) index the collector's per-expert tables.
TEST(TraceReader, TraceOfAnotherModelIsRefusedBeforeItsBlocks) {
  const std::string model = (test::data_dir() / "tinymoe").string();
  const model::ModelConfig c = model::load_config(model);
  const auto dir = test::temp_dir("trace_other_model");
  const std::string path = (dir / "other.zst").string();
  {
    TraceWriter w(path, 2 * c.num_experts, c.top_k);
    std::vector<int32_t> ids(size_t(4 * c.top_k));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(2 * c.num_experts - 1 - int64_t(i));
    const std::vector<float> gates(ids.size(), 0.5f);
    int64_t moe_layer = 0;  // a MoE layer, so the old reader's blocks reached the per-expert tables
    while (!c.layer_is_moe.empty() && !c.layer_is_moe[size_t(moe_layer)]) ++moe_layer;
    w.write_block(moe_layer, 4, ids.data(), gates.data());
    w.finish();
  }
  ProfileRequest r;
  r.model_path = model;
  r.source = SourceKind::kRouterLogits;
  r.input_path = path;
  r.policy = default_policy();
  try {
    run_profile(r);
    ADD_FAILURE() << "accepted a trace of " << 2 * c.num_experts << " experts";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--router-logits " + path + ": trace has " +
                                         std::to_string(2 * c.num_experts) + " experts"),
              std::string::npos)
        << e.what();
  }
}

// A trace of 160 MiB decompressed (15 blocks, ~11 MiB each, from a small .zst
// file): every block comes back exactly, the hash is that of the decompressed
// stream, and the reader's memory is about one block, not the whole stream
// (the old reader decompressed it whole: >= 160 MiB, twice over).
TEST(TraceReader, LargeCompressedTraceIsReadOneBlockAtATime) {
  const auto dir = test::temp_dir("trace_large");
  const std::string path = (dir / "big.zst").string();
  const int64_t experts = 64, top_k = 4, tokens = 460000, blocks = 15;
  std::vector<int32_t> ids(size_t(tokens * top_k));
  std::vector<float> gates(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = int32_t(i % 7 == 0 ? (i / 7) % experts : 3);
    gates[i] = i % 3 == 0 ? 0.5f : 0.125f;
  }
  {
    TraceWriter w(path, experts, top_k, 1);
    for (int64_t b = 0; b < blocks; ++b) w.write_block(b % 3, tokens, ids.data(), gates.data());
    w.finish();
  }
  const int64_t rss_before = peak_rss_kib();
  int64_t seen_blocks = 0;
  bool equal = true;
  const TraceHeader h = read_trace(path, [&](int64_t layer, int64_t n, const int32_t* got_ids, const float* got_gates) {
    equal = equal && layer == seen_blocks % 3 && n == tokens &&
            std::memcmp(got_ids, ids.data(), ids.size() * sizeof(int32_t)) == 0 &&
            std::memcmp(got_gates, gates.data(), gates.size() * sizeof(float)) == 0;
    ++seen_blocks;
  });
  [[maybe_unused]] const int64_t rss_growth_mib = (peak_rss_kib() - rss_before) / 1024;
  EXPECT_TRUE(equal);
  EXPECT_EQ(seen_blocks, blocks);
  EXPECT_EQ(h.num_experts, experts);
  EXPECT_EQ(h.top_k, top_k);
  const uint64_t raw_bytes = 16 + uint64_t(blocks) * (8 + 6 * uint64_t(tokens * top_k));
  EXPECT_EQ(raw_bytes, 165600136u);  // 158 MiB decompressed
  EXPECT_EQ(h.xxh64, xxhash64(io::read_file_bytes(path)));
  // One block is 11 MiB of stream + 14 MiB of ids and gates; the whole stream is 158 MiB.
  if (!eq::built_with_sanitizers()) {
    EXPECT_LT(rss_growth_mib, 80) << "peak RSS grew by " << rss_growth_mib << " MiB reading the trace";
  }
}

// A batch above kMaxTraceBlockSlots is written as several blocks that read
// back as the same routing, in order.
TEST(TraceWriter, SplitsBatchesAboveTheBlockLimit) {
  const auto dir = test::temp_dir("trace_split");
  const std::string path = (dir / "split.zst").string();
  const int64_t top_k = 8, tokens = int64_t(kMaxTraceBlockSlots / top_k) + 3;
  std::vector<int32_t> ids(size_t(tokens * top_k));
  std::vector<float> gates(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = int32_t(i % 16);
    gates[i] = float(i % 5) * 0.25f;
  }
  {
    TraceWriter w(path, 16, top_k, 1);
    w.write_block(5, tokens, ids.data(), gates.data());
    w.finish();
  }
  std::vector<int64_t> sizes;
  size_t at = 0;
  bool equal = true;
  read_trace(path, [&](int64_t layer, int64_t n, const int32_t* got_ids, const float* got_gates) {
    sizes.push_back(n);
    const size_t slots = size_t(n * top_k);
    equal = equal && layer == 5 && at + slots <= ids.size() &&
            std::memcmp(got_ids, ids.data() + at, slots * sizeof(int32_t)) == 0 &&
            std::memcmp(got_gates, gates.data() + at, slots * sizeof(float)) == 0;
    at += slots;
  });
  EXPECT_EQ(sizes, (std::vector<int64_t>{int64_t(kMaxTraceBlockSlots / top_k), 3}));
  EXPECT_TRUE(equal);
  EXPECT_EQ(at, ids.size());
}

}  // namespace
}  // namespace eq::profile
