// Bytes shown as UTF-8 text: valid sequences kept byte for byte, each maximal
// invalid subpart one U+FFFD.
#include <gtest/gtest.h>

#include <string>

#include "core/utf8.h"

namespace eq {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8, ValidTextIsKept) {
  const std::string text = "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80\n";  // café 日本 😀
  EXPECT_EQ(valid_utf8(text), text);
  EXPECT_EQ(valid_utf8(""), "");
}

TEST(Utf8, InvalidSequencesBecomeOneReplacementEach) {
  EXPECT_EQ(valid_utf8("a\xFF" "b"), "a" + kFffd + "b");                  // never a first byte
  EXPECT_EQ(valid_utf8("\x80\x80"), kFffd + kFffd);                      // stray continuations
  EXPECT_EQ(valid_utf8("\xE6\x97" "x"), kFffd + "x");                    // truncated 日: one subpart
  EXPECT_EQ(valid_utf8("ok\xE6\x97"), "ok" + kFffd);                     // truncated at the end
  EXPECT_EQ(valid_utf8("\xC0\xAF"), kFffd + kFffd);                      // overlong '/'
  EXPECT_EQ(valid_utf8("\xE0\x80\xAF"), kFffd + kFffd + kFffd);          // overlong, 3 bytes
  EXPECT_EQ(valid_utf8("\xED\xA0\x80"), kFffd + kFffd + kFffd);          // surrogate U+D800
  EXPECT_EQ(valid_utf8("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // above U+10FFFF
  EXPECT_EQ(valid_utf8("\xF4\x8F\xBF\xBF"), "\xF4\x8F\xBF\xBF");         // U+10FFFF itself
}

}  // namespace
}  // namespace eq
