#include "runtime/common/utf8.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace ctrlhost::common {
namespace {

constexpr char kEuro[] = "\xE2\x82\xAC";  // 3 bytes

std::string Repeat(absl::string_view s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out.append(s.data(), s.size());
  return out;
}

TEST(Utf8PrefixTest, ShortTextIsUnchanged) {
  EXPECT_EQ(Utf8Prefix("abc", 3), "abc");
  EXPECT_EQ(Utf8Prefix("abc", 10), "abc");
  EXPECT_EQ(Utf8Prefix("", 0), "");
}

TEST(Utf8PrefixTest, NeverSplitsACharacter) {
  const std::string euros = Repeat(kEuro, 10);  // 30 bytes
  EXPECT_EQ(Utf8Prefix(euros, 0), "");
  EXPECT_EQ(Utf8Prefix(euros, 1), "");
  EXPECT_EQ(Utf8Prefix(euros, 2), "");
  EXPECT_EQ(Utf8Prefix(euros, 3), kEuro);
  EXPECT_EQ(Utf8Prefix(euros, 4), kEuro);
  EXPECT_EQ(Utf8Prefix(euros, 29), Repeat(kEuro, 9));
  const std::string emoji = "a\xF0\x9F\x98\x80";  // 'a' + a 4-byte character
  for (size_t max = 1; max < emoji.size(); ++max) EXPECT_EQ(Utf8Prefix(emoji, max), "a") << max;
  for (size_t max = 0; max <= euros.size(); ++max) {
    EXPECT_TRUE(IsValidUtf8(Utf8Prefix(euros, max))) << max;
  }
}

TEST(Utf8PrefixTest, InvalidInputStillCutsAtTheLimit) {
  const std::string continuations(10, '\x80');
  EXPECT_EQ(Utf8Prefix(continuations, 5).size(), 5u);
}

// Regression: a plugin's 12,000 "€" cut with substr(0, 32768) made nlohmann's dump() throw.
TEST(Utf8PrefixTest, RegressionCutEuroNameDumpsAsJson) {
  const std::string message = "owned patch named " + Repeat(kEuro, 12000);
  const std::string cut = TruncateUtf8(message, 32768);
  EXPECT_LE(cut.size(), 32768u);
  EXPECT_GE(cut.size(), 32768u - 3);
  EXPECT_NO_THROW(nlohmann::json(cut).dump());
}

TEST(Utf8Test, IsValidUtf8) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8(Repeat(kEuro, 3)));
  EXPECT_TRUE(IsValidUtf8("\xF4\x8F\xBF\xBF"));   // U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xE2\x82"));          // cut
  EXPECT_FALSE(IsValidUtf8("\x80"));              // lone continuation
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xE0\x80\xAF"));      // overlong
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xFF"));
}

TEST(Utf8Test, ValidUtf8ReplacesIllFormedSequences) {
  EXPECT_EQ(ValidUtf8("abc"), "abc");
  EXPECT_EQ(ValidUtf8(kEuro), kEuro);
  EXPECT_EQ(ValidUtf8("a\xFF"
                      "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(ValidUtf8("a\xE2\x82"), "a\xEF\xBF\xBD");  // one replacement for the cut character
  EXPECT_EQ(ValidUtf8("\xE2\x82"
                      "b"),
            "\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(ValidUtf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  for (int b = 0; b < 256; ++b) {
    const std::string s = ValidUtf8(std::string(1, static_cast<char>(b)) + "\x80\xE2");
    EXPECT_TRUE(IsValidUtf8(s)) << b;
    EXPECT_NO_THROW(nlohmann::json(s).dump()) << b;
  }
}

TEST(Utf8Test, EscapeUnprintableLeavesPrintableTextAlone) {
  EXPECT_EQ(EscapeUnprintable(""), "");
  EXPECT_EQ(EscapeUnprintable("plain text: 100% ok \\ \"quoted\""),
            "plain text: 100% ok \\ \"quoted\"");
  const std::string unicode =
      absl::StrCat("caf\xC3\xA9 ", kEuro, " \xF0\x9F\x98\x80 \xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D");
  EXPECT_EQ(EscapeUnprintable(unicode), unicode);
}

TEST(Utf8Test, EscapeUnprintableMakesControlsVisible) {
  // A fake log line and a terminal escape (clear screen, red text) from a plugin.
  EXPECT_EQ(EscapeUnprintable("failed\n2026-01-01T00:00:00Z INFO all good"),
            "failed\\n2026-01-01T00:00:00Z INFO all good");
  EXPECT_EQ(EscapeUnprintable("\x1b[2J\x1b[31mred"), "\\x1b[2J\\x1b[31mred");
  EXPECT_EQ(EscapeUnprintable("a\rb\tc\x7f"), "a\\rb\\tc\\x7f");
  EXPECT_EQ(EscapeUnprintable(std::string("nul\0byte", 8)), "nul\\x00byte");
  // C1 CSI (U+009B), NEL (U+0085), the line separator and a right-to-left override.
  EXPECT_EQ(EscapeUnprintable("\xC2\x9B"
                              "2J \xC2\x85 \xE2\x80\xA8 \xE2\x80\xAE"
                              "evil"),
            "\\u009b2J \\u0085 \\u2028 \\u202eevil");
  // Ill-formed bytes, one escape per byte.
  EXPECT_EQ(EscapeUnprintable("bad\xFF\xFEname"), "bad\\xff\\xfename");
  EXPECT_EQ(EscapeUnprintable("cut\xE2\x82"), "cut\\xe2\\x82");
  for (int b = 0; b < 256; ++b) {
    const std::string s = EscapeUnprintable(std::string(1, static_cast<char>(b)) + "\x80\xE2");
    EXPECT_TRUE(IsValidUtf8(s)) << b;
    for (char ch : s) EXPECT_FALSE(static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) << b;
  }
}

}  // namespace
}  // namespace ctrlhost::common
