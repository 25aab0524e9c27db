// Kubernetes JSONPath (CRD additionalPrinterColumns): parse, then evaluate on an object.
#include "runtime/apiserver/jsonpath.h"
#include "tools/fuzzers/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ctrlhost;
  static const nlohmann::json* const object = new nlohmann::json(nlohmann::json::parse(R"({
    "metadata": {"name": "a", "labels": {"k": "v"}},
    "spec": {"l": [{"m": [{"n": 1}], "name": "x"}, {"m": [], "name": "y"}], "n": null},
    "status": {"conditions": [{"type": "Ready", "status": "True"}], "replicas": 3}
  })"));
  auto path = apiserver::JsonPath::Parse(fuzz::Bytes(data, size));
  if (path.ok()) {
    path->FindAll(*object);
  } else {
    fuzz::RequireClientError(path.status());
  }
  return 0;
}
