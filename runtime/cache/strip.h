// Byte-range stripping of metadata members from an object's JSON, without re-serialising it.
//
// The cache drops `metadata.managedFields` and the
// `kubectl.kubernetes.io/last-applied-configuration` annotation from every object it stores.
// Rebuilding the JSON from a parsed tree costs more than parsing it; instead a small scanner
// finds the byte ranges of the members to remove (with the comma that separates them from
// their neighbours) and the caller copies the bytes around them. Everything that is kept keeps
// its exact original bytes: whitespace, member order, number spelling, string escapes.
//
//   StripCuts cuts;
//   if (FindStripCuts(json, {.managed_fields = true}, &cuts).ok()) {
//     std::string stripped = ApplyStripCuts(json, cuts);
//   }
//
// ObjectParser uses FindStripCutsInTokens, which reads the same members through the structural
// indexes simdjson's DOM parse leaves behind, so skipping `managedFields` costs one step per
// token instead of one per byte; FindStripCuts reads the bytes and needs nothing else. Both are
// pure functions, safe on any thread.
//
// The scanner is meant for documents a validating parser has already accepted (ObjectParser
// parses with simdjson's DOM first and scans only objects that carry something to strip). It
// still checks every byte it reads against the end of the input and reports kInvalidArgument
// for anything it cannot follow, so no input makes it read out of bounds or crash.
#ifndef CTRLHOST_RUNTIME_CACHE_STRIP_H_
#define CTRLHOST_RUNTIME_CACHE_STRIP_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace ctrlhost::cache {

struct StripSelection {
  // Remove every `managedFields` member of a top-level `metadata` object.
  bool managed_fields = true;
  // Remove every kubectl last-applied-configuration member of `metadata.annotations`; when no
  // other annotation remains, remove the `annotations` member itself.
  bool last_applied = true;
};

// A half-open byte range [begin, end) of the input to leave out.
struct ByteRange {
  size_t begin = 0;
  size_t end = 0;
  bool operator==(const ByteRange& o) const { return begin == o.begin && end == o.end; }
};

// Cuts in increasing, non-overlapping order.
using StripCuts = std::vector<ByteRange>;

// Replaces `*cuts` with the ranges of `json` (one JSON object) to remove: none when there is
// nothing to strip. (An output parameter so that a parser reuses one vector for every object.)
// On error `*cuts` holds whatever was found before it and must not be applied.
// Errors: kInvalidArgument when `json` is not a well-formed JSON object as far as the scanner
// reads it (it reads the top-level members and the inside of `metadata`; other values are
// skipped by matching brackets and quotes, not validated).
absl::Status FindStripCuts(absl::string_view json, StripSelection selection, StripCuts* cuts);

// The same, reading `json` through `tokens`: simdjson's stage-1 structural indexes of `json`
// (the byte offsets of every `{}[]:,` and of the first byte of every string and scalar), as a
// DOM parse of `json` leaves them. Much faster than reading the bytes: a skipped value costs
// one step per token, not per byte. Cuts reach up to the next token, so whitespace between a
// removed value and the following comma or brace goes with it. Offsets beyond `json` are
// refused (kInvalidArgument), never read.
absl::Status FindStripCutsInTokens(absl::string_view json, absl::Span<const uint32_t> tokens,
                                   StripSelection selection, StripCuts* cuts);

// `json` without the `cuts` (as returned by FindStripCuts for the same `json`).
std::string ApplyStripCuts(absl::string_view json, const StripCuts& cuts);

}  // namespace ctrlhost::cache

#endif  // CTRLHOST_RUNTIME_CACHE_STRIP_H_
