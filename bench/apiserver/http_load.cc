#include "bench/apiserver/http_load.h"

#include <httplib.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/report.h"
#include "runtime/common/status_macros.h"

namespace ctrlhost::bench {
namespace {

const char kUserAgent[] = "apiserver-bench/v1";
const char kCrdPath[] = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

// spec.payload makes a stored widget about 1 KiB with the server's metadata, like the storage
// benchmark's objects and a typical small custom resource.
const std::string& Payload() {
  static const std::string* payload = new std::string(560, 'x');
  return *payload;
}

std::unique_ptr<httplib::Client> NewClient(const Endpoint& endpoint) {
  auto client = std::make_unique<httplib::Client>(endpoint.url);
  if (!endpoint.ca_path.empty()) {
    client->set_ca_cert_path(endpoint.ca_path.c_str());
    client->enable_server_certificate_verification(true);
  }
  if (!endpoint.token.empty()) client->set_bearer_token_auth(endpoint.token.c_str());
  client->set_keep_alive(true);
  client->set_tcp_nodelay(true);  // as Go's net/http (kubectl, client-go) does
  client->set_connection_timeout(10);
  client->set_read_timeout(30);
  client->set_write_timeout(30);
  return client;
}

httplib::Headers Headers() { return {{"User-Agent", kUserAgent}, {"Accept", "application/json"}}; }

std::string Describe(const httplib::Result& result) {
  if (!result) return absl::StrCat("transport error: ", httplib::to_string(result.error()));
  return absl::StrCat("HTTP ", result->status, ": ", result->body.substr(0, 300));
}

bool Ok(const httplib::Result& result) {
  return result && result->status >= 200 && result->status < 300;
}

std::string WidgetBody(const std::string& name, int64_t n) {
  return absl::StrCat(
      R"({"apiVersion":"bench.ctrlhost.dev/v1","kind":"Widget","metadata":{"name":")", name,
      R"(","labels":{"app":"apiserver-bench"}},"spec":{"size":)", n, R"(,"payload":")", Payload(),
      R"("}})");
}

std::string StatusPatch(int64_t n) {
  return absl::StrCat(R"({"status":{"observed":)", n, R"(,"phase":"Ready"}})");
}

std::string WidgetPath(const std::string& name) { return absl::StrCat(kWidgetsPath, "/", name); }

const char kCrd[] = R"({
  "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "widgets.bench.ctrlhost.dev"},
  "spec": {
    "group": "bench.ctrlhost.dev", "scope": "Namespaced",
    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
              "listKind": "WidgetList"},
    "versions": [{
      "name": "v1", "served": true, "storage": true,
      "subresources": {"status": {}},
      "schema": {"openAPIV3Schema": {"type": "object",
                                      "x-kubernetes-preserve-unknown-fields": true}}
    }]
  }
})";

}  // namespace

int64_t NowNanos() {
  static const std::chrono::steady_clock::time_point origin = std::chrono::steady_clock::now();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                              origin)
      .count();
}

absl::Status SetUpBenchResource(const Endpoint& endpoint) {
  auto client = NewClient(endpoint);
  auto ns = client->Post("/api/v1/namespaces", Headers(),
                         R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"bench"}})",
                         "application/json");
  if (!Ok(ns) && !(ns && ns->status == 409)) {
    return absl::UnavailableError(absl::StrCat("create namespace bench: ", Describe(ns)));
  }
  auto crd = client->Post(kCrdPath, Headers(), kCrd, "application/json");
  if (!Ok(crd) && !(crd && crd->status == 409)) {
    return absl::UnavailableError(absl::StrCat("create the Widget CRD: ", Describe(crd)));
  }
  // The server registers a CRD's resource before answering; still, wait (bounded) the way a
  // client would for Established, rather than depend on that.
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (true) {
    auto list = client->Get(kWidgetsPath, Headers());
    if (Ok(list)) break;
    if (absl::Now() > give_up) {
      return absl::DeadlineExceededError(
          absl::StrCat("the Widget resource is not served: ", Describe(list)));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  auto sentinel =
      client->Post(kWidgetsPath, Headers(), WidgetBody(kSentinelName, 0), "application/json");
  if (!Ok(sentinel) && !(sentinel && sentinel->status == 409)) {
    return absl::UnavailableError(absl::StrCat("create the sentinel: ", Describe(sentinel)));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> TouchSentinel(const Endpoint& endpoint) {
  static std::atomic<int64_t> touches{0};
  auto client = NewClient(endpoint);
  auto result = client->Patch(absl::StrCat(WidgetPath(kSentinelName), "/status"), Headers(),
                              StatusPatch(++touches), "application/merge-patch+json");
  if (!Ok(result)) {
    return absl::UnavailableError(absl::StrCat("patch the sentinel: ", Describe(result)));
  }
  return ParseResourceVersion(result->body);
}

absl::StatusOr<WriteRun> RunWriters(const Endpoint& endpoint, const WriteOptions& options) {
  if (options.kind == WriteKind::kStatusPatch) {
    if (static_cast<int>(options.patch_objects.size()) < options.clients) {
      return absl::InvalidArgumentError("patch_objects needs one count per client");
    }
    for (int c = 0; c < options.clients; ++c) {
      if (options.patch_objects[c] <= 0) {
        return absl::FailedPreconditionError(
            absl::StrCat("client ", c, " has no objects to patch (its creates failed)"));
      }
    }
  }
  struct PerClient {
    int64_t errors = 0;
    std::string first_error;
    std::vector<absl::Duration> latencies;
    std::vector<std::pair<int64_t, int64_t>> acks;
    std::string sample_body;
  };
  std::vector<PerClient> results(options.clients);
  std::vector<std::unique_ptr<httplib::Client>> clients;
  for (int c = 0; c < options.clients; ++c) clients.push_back(NewClient(endpoint));
  // Connect (and handshake) before the clock starts: a Kubernetes client keeps its connection.
  for (auto& client : clients) {
    auto warm = client->Get("/version", Headers());
    if (!Ok(warm)) return absl::UnavailableError(absl::StrCat("GET /version: ", Describe(warm)));
  }
  static std::atomic<int64_t> patch_counter{0};
  std::vector<std::thread> threads;
  Stopwatch total;
  for (int c = 0; c < options.clients; ++c) {
    threads.emplace_back([&, c] {
      PerClient& mine = results[c];
      httplib::Client& client = *clients[c];
      for (int64_t n = 0; total.Elapsed() < options.duration; ++n) {
        Stopwatch one;
        httplib::Result result =
            options.kind == WriteKind::kCreate
                ? client.Post(kWidgetsPath, Headers(),
                              WidgetBody(absl::StrCat(options.name_prefix, "c", c, "-", n), n),
                              "application/json")
                : client.Patch(
                      absl::StrCat(WidgetPath(absl::StrCat(options.name_prefix, "c", c, "-",
                                                           n % options.patch_objects[c])),
                                   "/status"),
                      Headers(), StatusPatch(++patch_counter), "application/merge-patch+json");
        if (!Ok(result)) {
          if (mine.errors++ == 0) mine.first_error = Describe(result);
          continue;
        }
        absl::StatusOr<int64_t> rv = ParseResourceVersion(result->body);
        const int64_t acked = NowNanos();
        if (!rv.ok()) {
          if (mine.errors++ == 0) mine.first_error = rv.status().ToString();
          continue;
        }
        mine.latencies.push_back(one.Elapsed());
        mine.acks.emplace_back(*rv, acked);
        if (mine.sample_body.empty()) mine.sample_body = result->body;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  WriteRun run;
  run.elapsed = total.Elapsed();
  for (PerClient& mine : results) {
    run.writes += static_cast<int64_t>(mine.acks.size());
    run.per_client.push_back(static_cast<int64_t>(mine.acks.size()));
    run.errors += mine.errors;
    if (run.first_error.empty()) run.first_error = mine.first_error;
    if (run.sample_body.empty()) run.sample_body = mine.sample_body;
    run.latencies.insert(run.latencies.end(), mine.latencies.begin(), mine.latencies.end());
    run.acks.insert(run.acks.end(), mine.acks.begin(), mine.acks.end());
  }
  return run;
}

absl::StatusOr<std::unique_ptr<WatchFleet>> WatchFleet::Start(const Endpoint& endpoint, int count,
                                                              int64_t from_revision,
                                                              absl::Duration connect_timeout) {
  std::unique_ptr<WatchFleet> fleet(new WatchFleet(endpoint));
  {
    common::MutexLock lock(&fleet->mu_);
    fleet->clients_.assign(count, nullptr);
  }
  for (int i = 0; i < count; ++i) fleet->watchers_.push_back(std::make_unique<Watcher>());
  for (int i = 0; i < count; ++i) {
    fleet->threads_.emplace_back([f = fleet.get(), i, from_revision] { f->Run(i, from_revision); });
  }
  const absl::Time deadline = absl::Now() + connect_timeout;
  bool all_ready = false;
  {
    common::MutexLock lock(&fleet->mu_);
    while (fleet->ready_ < count && absl::Now() < deadline) {
      fleet->cv_.WaitWithDeadline(&fleet->mu_, deadline);
    }
    all_ready = fleet->ready_ == count;
  }
  if (!all_ready) {
    fleet->WaitForSentinel(absl::Now());  // stops and joins
    return absl::DeadlineExceededError(absl::StrCat(
        "not all ", count, " watchers connected within ", absl::FormatDuration(connect_timeout)));
  }
  // A watcher that ended before the writes start failed to connect: report its error. Reading
  // its slot is safe only once its thread is joined, so join everything first.
  bool any_finished = false;
  {
    common::MutexLock lock(&fleet->mu_);
    any_finished = fleet->finished_ > 0;
  }
  if (any_finished) {
    fleet->WaitForSentinel(absl::Now());
    for (const auto& w : fleet->watchers_) {
      if (!w->status.ok()) return w->status;
    }
    return absl::UnavailableError("a watcher's stream ended before any write");
  }
  return fleet;
}

WatchFleet::~WatchFleet() { WaitForSentinel(absl::Now()); }

void WatchFleet::MarkReady() {
  common::MutexLock lock(&mu_);
  ++ready_;
  cv_.SignalAll();
}

void WatchFleet::Run(int index, int64_t from_revision) {
  Watcher& me = *watchers_[index];
  std::unique_ptr<httplib::Client> client = NewClient(endpoint_);
  // A watch is idle between events; the server ends it after timeoutSeconds at the latest.
  client->set_read_timeout(60);
  {
    common::MutexLock lock(&mu_);
    clients_[index] = client.get();
  }
  bool ready = false;
  WatchStreamParser parser;
  const std::string path = absl::StrCat(kWidgetsPath, "?watch=true&resourceVersion=", from_revision,
                                        "&timeoutSeconds=600");
  auto result = client->Get(
      path, Headers(),
      [&](const httplib::Response& response) {
        if (response.status != 200) {
          me.status = absl::UnavailableError(absl::StrCat("watch answered HTTP ", response.status));
          return false;
        }
        ready = true;
        MarkReady();
        return true;
      },
      [&](const char* data, size_t length) {
        const int64_t now = NowNanos();
        bool keep_going = true;
        parser.Feed(absl::string_view(data, length), [&](const WatchLine& line) {
          if (!keep_going) return;
          if (line.type == "ERROR") {
            me.status = absl::AbortedError("the server sent an ERROR event");
            keep_going = false;
          } else if (line.type == "BOOKMARK") {
          } else if (line.name == kSentinelName) {
            me.saw_sentinel = true;
            me.sentinel_nanos = now;
            keep_going = false;
          } else {
            me.checker.Add(line.resource_version);
            me.received.emplace_back(line.resource_version, now);
          }
        });
        if (!parser.status().ok() && me.status.ok()) me.status = parser.status();
        return keep_going && parser.status().ok();
      });
  if (!result && me.status.ok() && !me.saw_sentinel) {
    me.status = absl::UnavailableError(
        absl::StrCat("watch stream ended: ", httplib::to_string(result.error())));
  } else if (result && me.status.ok() && !me.saw_sentinel) {
    me.status = absl::UnavailableError(
        absl::StrCat("watch stream ended before the sentinel (HTTP ", result->status, ")"));
  }
  common::MutexLock lock(&mu_);
  clients_[index] = nullptr;
  if (!ready) ++ready_;
  ++finished_;
  cv_.SignalAll();
}

bool WatchFleet::WaitForSentinel(absl::Time deadline) {
  {
    common::MutexLock lock(&mu_);
    const int count = static_cast<int>(threads_.size());
    while (finished_ < count && absl::Now() < deadline) cv_.WaitWithDeadline(&mu_, deadline);
    for (httplib::Client* client : clients_) {
      if (client != nullptr) client->stop();
    }
  }
  for (auto& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
  for (const auto& w : watchers_) {
    if (!w->saw_sentinel) return false;
  }
  return true;
}

}  // namespace ctrlhost::bench
