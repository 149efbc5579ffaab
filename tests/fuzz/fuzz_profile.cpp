// profile.json as `pack --profile` and `profile --merge` read it:
// read_profile_text, what read_profile runs on the file's bytes. The path only
// names the input and locates a sidecar; it is in a folder that does not
// exist, so an `importance_file` the fuzzer writes is never found.
#include <string_view>

#include "fuzz/fuzz_target.h"
#include "profile/profile.h"

EQ_FUZZ_TARGET(profile) {
  eq::profile::read_profile_text(
      std::string_view(reinterpret_cast<const char*>(input.data()), input.size()),
      "/nonexistent-eq-fuzz/profile.json");
}
