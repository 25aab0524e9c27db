// The tokens of list and watch requests that clients hand back to the server: continue tokens
// (`?continue=`, opaque to clients) and resourceVersions (`?resourceVersion=`).
//
//   std::string next = EncodeContinue(list.revision, list.last_key);
//   ASSIGN_OR_RETURN(ContinueToken token, DecodeContinue(query["continue"]));
//   ASSIGN_OR_RETURN(int64_t rv, ParseResourceVersion(query["resourceVersion"]));
//
// Both come from clients: anything malformed is 400 BadRequest. Pure and thread-safe.
#ifndef CTRLHOST_RUNTIME_APISERVER_LIST_TOKENS_H_
#define CTRLHOST_RUNTIME_APISERVER_LIST_TOKENS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ctrlhost::apiserver {

// Where a paginated list continues: the revision it reads at and the last key it returned.
struct ContinueToken {
  int64_t revision = 0;
  std::string key;
};

// Web-safe base64 of {"v":"meta.k8s.io/v1","rv":revision,"key":key} (like kube-apiserver's).
std::string EncodeContinue(int64_t revision, const std::string& key);
// The token EncodeContinue made (standard base64 accepted too); 400 for anything else.
absl::StatusOr<ContinueToken> DecodeContinue(const std::string& token);

// A resourceVersion: a non-negative decimal integer; 400 "invalid resource version" otherwise.
absl::StatusOr<int64_t> ParseResourceVersion(absl::string_view rv);

}  // namespace ctrlhost::apiserver

#endif  // CTRLHOST_RUNTIME_APISERVER_LIST_TOKENS_H_
