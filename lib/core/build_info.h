// Facts about how this copy of the library was compiled that a run may need:
// the test suite links one set of test objects against a plain and a
// sanitized library (CMakeLists.txt, EQ_SANITIZER_TESTS) and asks the library
// which one it is.
#pragma once

namespace eq {

// True when the library was compiled with AddressSanitizer + UndefinedBehaviorSanitizer
// (EQ_SANITIZE): memory figures are then inflated by shadow memory and the code runs several times slower.
bool built_with_sanitizers();

}  // namespace eq
