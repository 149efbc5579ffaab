// manifest.json of a packed model: schema, references between tensors,
// groups and experts, and the stored totals.
#include <string_view>

#include "fuzz/fuzz_target.h"
#include "pack/manifest.h"

EQ_FUZZ_TARGET(manifest) {
  eq::pack::parse_manifest_text(std::string_view(reinterpret_cast<const char*>(input.data()), input.size()),
                                "fuzz/manifest.json");
}
