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

std::string* config_dir = nullptr;
std::string* config_path = nullptr;

void RemoveConfigDir() {
  unlink(config_path->c_str());
  rmdir(config_dir->c_str());
}

// One file per fuzzing process, in a directory of its own (relative paths inside the
// kubeconfig resolve against it), removed when the process exits.
const std::string& ConfigPath() {
  if (config_path == nullptr) {
    const char* tmp = std::getenv("TMPDIR");
    config_dir = new std::string(std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
                                 "/kubeconfig-fuzz-XXXXXX");
    ctrlhost::fuzz::Require(mkdtemp(config_dir->data()) != nullptr, "mkdtemp");
    config_path = new std::string(*config_dir + "/config");
    std::atexit(RemoveConfigDir);
  }
  return *config_path;
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
