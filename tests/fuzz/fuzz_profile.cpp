// profile.json as `pack --profile` and `profile --merge` read it (read_profile).
#include "fuzz/fuzz_file_input.h"
#include "fuzz/fuzz_target.h"
#include "profile/profile.h"

EQ_FUZZ_TARGET(profile) {
  static eq::fuzz::TempInputFile file("profile.json");
  eq::profile::read_profile(file.write(input));
}
