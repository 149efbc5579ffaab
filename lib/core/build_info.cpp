#include "core/build_info.h"

namespace eq {

bool built_with_sanitizers() {
#ifdef EQ_SANITIZE
  return true;
#else
  return false;
#endif
}

}  // namespace eq
