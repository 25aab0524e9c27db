// UTF-8 helpers for text that comes from outside the host (plugin answers, plugin output) and
// goes into JSON, Kubernetes objects or logs, where a broken sequence is an error (nlohmann's
// dump() throws on one) or garbage.
//
//   condition.set_message(common::TruncateUtf8(message, 32768));   // never splits a character
//   json["message"] = common::ValidUtf8(plugin_text);              // invalid bytes -> U+FFFD
//   event["message"] = common::EscapeUnprintable(plugin_text);     // "a\nb" -> "a\\nb"
//
// Thread-safe: pure functions.
#ifndef CTRLHOST_RUNTIME_COMMON_UTF8_H_
#define CTRLHOST_RUNTIME_COMMON_UTF8_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace ctrlhost::common {

// The longest prefix of `text` of at most `max_bytes` bytes that does not end inside a UTF-8
// sequence. Where `text` is not valid UTF-8 the cut is still never after a lead byte whose
// continuation bytes were cut off. Borrows `text`.
absl::string_view Utf8Prefix(absl::string_view text, size_t max_bytes);

// Utf8Prefix as a string.
inline std::string TruncateUtf8(absl::string_view text, size_t max_bytes) {
  return std::string(Utf8Prefix(text, max_bytes));
}

// True if `text` is well-formed UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF).
bool IsValidUtf8(absl::string_view text);

// `text` with every ill-formed sequence replaced by U+FFFD (one per maximal ill-formed
// subpart, as the Unicode standard recommends). Valid input is returned unchanged.
std::string ValidUtf8(absl::string_view text);

// `text` made safe to show where a reader sees it as text (a terminal, `kubectl describe`, a
// log viewer): valid UTF-8 with no character that moves the cursor, starts an escape sequence,
// breaks a line or reorders what follows. Those become visible escapes: LF, CR and tab as `\n`,
// `\r`, `\t`; other C0 controls, DEL and each byte of an ill-formed sequence as `\xNN`; C1
// controls (U+0080..U+009F), the line and paragraph separators U+2028/U+2029 and the
// bidirectional embeddings, overrides and isolates (U+202A..U+202E, U+2066..U+2069) as
// `\uNNNN`. Everything else, other non-ASCII text included, is unchanged, and so is a
// backslash: the result is for reading, not for decoding back.
std::string EscapeUnprintable(absl::string_view text);

}  // namespace ctrlhost::common

#endif  // CTRLHOST_RUNTIME_COMMON_UTF8_H_
