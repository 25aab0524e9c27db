// Continue tokens and resourceVersions of list/watch requests.
#include <string>

#include "runtime/apiserver/list_tokens.h"
#include "tools/fuzzers/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ctrlhost;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto token = apiserver::DecodeContinue(text);
  if (token.ok()) {
    // What decodes re-encodes to a token that decodes to the same place.
    auto again = apiserver::DecodeContinue(apiserver::EncodeContinue(token->revision, token->key));
    fuzz::Require(again.ok() && again->revision == token->revision && again->key == token->key,
                  "continue token round trip");
  } else {
    fuzz::RequireClientError(token.status());
  }
  auto rv = apiserver::ParseResourceVersion(text);
  if (rv.ok()) {
    fuzz::Require(*rv >= 0, "negative resourceVersion accepted");
  } else {
    fuzz::RequireClientError(rv.status());
  }
  return 0;
}
