// kubeconfig files (`--kubeconfig`, $KUBECONFIG): the text is written to a file and loaded
// alone, merged with itself (kubectl's $KUBECONFIG rules) and with a named context. Errors must
// be client errors naming the file; a loaded config must have a host.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "runtime/kube/kubeconfig.h"
#include "tools/fuzzers/fuzz_common.h"

namespace {

// One file per fuzzing process, in a directory of its own (relative paths inside the
// kubeconfig resolve against it).
const std::string& ConfigPath() {
  static const std::string* path = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string dir =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/kubeconfig-fuzz-XXXXXX";
    ctrlhost::fuzz::Require(mkdtemp(dir.data()) != nullptr, "mkdtemp");
    return new std::string(dir + "/config");
  }();
  return *path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ctrlhost;
  const std::string& path = ConfigPath();
  FILE* f = std::fopen(path.c_str(), "wb");
  fuzz::Require(f != nullptr, "cannot write the kubeconfig file");
  fuzz::Require(std::fwrite(data, 1, size, f) == size, "short write");
  std::fclose(f);

  for (const char* context : {"", "one"}) {
    auto config = kube::LoadKubeconfigFile(path, context);
    if (config.ok()) {
      fuzz::Require(!config->host.empty(), "a loaded kubeconfig has a host");
      config->Token().IgnoreError();  // may read a tokenFile
    } else {
      fuzz::RequireClientError(config.status());
      fuzz::Require(absl::StrContains(config.status().message(), path),
                    "kubeconfig errors name the file");
    }
  }
  auto merged = kube::LoadKubeconfigFiles({path, path});
  if (!merged.ok()) fuzz::RequireClientError(merged.status());
  return 0;
}
