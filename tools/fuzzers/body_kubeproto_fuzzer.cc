// Kubernetes protobuf request bodies (application/vnd.kubernetes.protobuf).
#include <string>

#include "runtime/apiserver/kubeproto/kubeproto.h"
#include "tools/fuzzers/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ctrlhost;
  // Without the magic every input would stop at the first check: prepend it to most.
  std::string body(reinterpret_cast<const char*>(data), size);
  if (size == 0 || data[0] != 'k') body.insert(0, std::string("k8s\0", 4));
  auto parsed = apiserver::DecodeKubeProtobuf(body);
  if (parsed.ok()) {
    fuzz::Serialize(*parsed);
  } else {
    fuzz::RequireClientError(parsed.status());
  }
  return 0;
}
