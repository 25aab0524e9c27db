// YAML request bodies (create/update/apply): ParseObjectBody with application/yaml.
#include "runtime/apiserver/object_util.h"
#include "tools/fuzzers/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ctrlhost;
  auto parsed = apiserver::ParseObjectBody("application/yaml", fuzz::Bytes(data, size));
  if (parsed.ok()) {
    fuzz::Serialize(*parsed);
  } else {
    fuzz::RequireClientError(parsed.status());
  }
  return 0;
}
