#include "pack/format_tally.h"

#include "pack/manifest.h"

namespace eq::pack {

plan::FormatTally format_mix(const Manifest& m) {
  plan::FormatTally t;
  for (const ManifestLayer& l : m.layers)
    for (const ManifestExpert& e : l.experts)
      t.add(e.cls == plan::ExpertClass::kPruned ? "" : e.format, e.bytes_after);
  return t;
}

}  // namespace eq::pack
