// JSON request bodies (create/update/delete): ParseObjectBody and the duplicate-field scan.
#include "runtime/apiserver/object_util.h"
#include "tools/fuzzers/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ctrlhost;
  const absl::string_view body = fuzz::Bytes(data, size);
  auto parsed = apiserver::ParseObjectBody("application/json", body);
  if (parsed.ok()) {
    fuzz::Serialize(*parsed);
  } else {
    fuzz::RequireClientError(parsed.status());
  }
  apiserver::DuplicateJsonFields(body);
  apiserver::ExtractLabels(body);
  apiserver::ReadOwnership(body);
  return 0;
}
