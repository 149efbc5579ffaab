// model.safetensors.index.json. The text is parsed and validated in memory;
// an index that passes is then written beside a tiny valid shard and opened
// as a checkpoint, which cross-checks the index against the shard's tensors.
#include <unistd.h>

#include <cstdlib>
#include <system_error>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_target.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"

namespace {

// A folder holding "shard.safetensors" with tensors "a" (f32[2]) and "b"
// (u8[3]); created once per process, removed at exit.
struct CheckpointFolder {
  std::string path;
  CheckpointFolder() {
    path = (std::filesystem::temp_directory_path() / "eq_fuzz_index_XXXXXX").string();
    if (!::mkdtemp(path.data())) std::abort();
    const float a[2] = {1.0f, 2.0f};
    const uint8_t b[3] = {1, 2, 3};
    const eq::io::TensorToWrite tensors[] = {
        {"a", eq::DType::kF32, {2}, {reinterpret_cast<const uint8_t*>(a), sizeof a}},
        {"b", eq::DType::kU8, {3}, {b, sizeof b}},
    };
    eq::io::write_safetensors(path + "/shard.safetensors", tensors);
  }
  ~CheckpointFolder() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

const std::string& checkpoint_folder() {
  static const CheckpointFolder folder;
  return folder.path;
}

}  // namespace

EQ_FUZZ_TARGET(shard_index) {
  const std::string_view text(reinterpret_cast<const char*>(input.data()), input.size());
  eq::io::parse_shard_index(text, "fuzz.index.json");
  const std::string& folder = checkpoint_folder();
  eq::io::write_file_atomic(folder + "/model.safetensors.index.json", text);
  eq::io::Checkpoint::open(folder);
}
