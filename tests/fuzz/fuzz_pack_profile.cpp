// profile.json as `pack --profile` reads it (plan::read_profile_inputs: schema,
// version, model fingerprint, allocation, importance pairing), from a file
// in a private folder so that a relative importance_file is never found.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include "fuzz/fuzz_target.h"
#include "io/atomic_file.h"
#include "plan/profile_inputs.h"

namespace {

struct ProfileFolder {
  std::string path;
  ProfileFolder() {
    path = (std::filesystem::temp_directory_path() / "eq_fuzz_pack_profile_XXXXXX").string();
    if (!::mkdtemp(path.data())) std::abort();
  }
  ~ProfileFolder() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

const std::string& profile_folder() {
  static const ProfileFolder folder;
  return folder.path;
}

}  // namespace

EQ_FUZZ_TARGET(pack_profile) {
  const std::string path = profile_folder() + "/profile.json";
  eq::io::write_file_atomic(path, std::string_view(reinterpret_cast<const char*>(input.data()), input.size()));
  eq::plan::read_profile_inputs(path);
}
