// Test helper for durability_test: writes to a store from several threads until killed,
// printing one line per acknowledged write to stdout:
//   P <key> <revision> <value>     a put (each key is put once)
//   D <key> <revision>             a delete of a key put earlier
// Usage: crash_writer <db path> <full|normal> <threads> <key tag>
// Keys are /crash/<tag>/t<thread>/<n>.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/apiserver/storage/store.h"

namespace {

// One write() per line: a pipe write of at most PIPE_BUF bytes is atomic, so lines of
// concurrent threads never interleave.
void Report(const std::string& line) {
  const ssize_t written = write(STDOUT_FILENO, line.data(), line.size());
  if (written != static_cast<ssize_t>(line.size())) std::_Exit(3);
}

}  // namespace

int main(int argc, char** argv) {
  using ctrlhost::apiserver::Mutation;
  using ctrlhost::apiserver::StoredObject;
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s <db path> <full|normal> <threads> <key tag>\n", argv[0]);
    return 2;
  }
  ctrlhost::apiserver::StoreOptions options;
  options.path = argv[1];
  options.sync_full = std::string(argv[2]) == "full";
  auto store = ctrlhost::apiserver::Store::Open(options);
  if (!store.ok()) {
    std::fprintf(stderr, "open: %s\n", store.status().ToString().c_str());
    return 1;
  }
  const int threads = std::atoi(argv[3]);
  const std::string tag = argv[4];
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int n = 0;; ++n) {
        const std::string key = absl::StrCat("/crash/", tag, "/t", t, "/", n);
        auto put = (*store)->Write(
            key, [&](const StoredObject*, int64_t revision) -> absl::StatusOr<Mutation> {
              return Mutation{Mutation::Op::kPut,
                              absl::StrCat("{\"t\":", t, ",\"rv\":", revision, "}")};
            });
        if (!put.ok()) std::_Exit(4);
        Report(absl::StrCat("P ", key, " ", (*put)->mod_revision, " ", (*put)->value, "\n"));
        if (n % 10 == 9) {
          const std::string victim = absl::StrCat("/crash/", tag, "/t", t, "/", n - 5);
          auto removed =
              (*store)->Write(victim, [](const StoredObject*, int64_t) -> absl::StatusOr<Mutation> {
                return Mutation{Mutation::Op::kDelete, ""};
              });
          if (!removed.ok()) std::_Exit(5);
          Report(absl::StrCat("D ", victim, " ", (*removed)->mod_revision, "\n"));
        }
      }
    });
  }
  for (auto& worker : workers) worker.join();  // never: the test kills us
  return 0;
}
