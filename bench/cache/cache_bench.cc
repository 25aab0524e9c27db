// The issue-4 cache benchmarks (bench/README.md): `cache-memory` and `ingest`.
//
// Starts the embedded API server in-process (HTTPS, fresh data dir under $TMPDIR), loads
// ConfigMaps (~1 KB) and Pod-like custom objects (~5 KB, half of it managedFields) through the
// API, lists them back through kube::Client and then, per kind:
//   memory: heap bytes per object of cache::ObjectParser + cache::Store::Replace (mallinfo2
//           delta around the ingest, the listed bytes held on both sides), against
//           1.3 x stored JSON + 200 B and against @kubernetes/client-node's informer
//           (bench/cache/informer_memory.js in a child node process, same server, same run)
//           and against client-go's informer (typed ConfigMaps; PodLikes decoded as typed Pods:
//           bench/shared_cache/clientgo/main.go's `memory` command, Kubernetes 1.20.2's
//           client-go), target <= 0.5x.
//   ingest: parse + Replace rate over the listed bytes as a ratio to simdjson On-Demand walking
//           every value of the same bytes; list over HTTP + parse + Replace against the
//           client-node informer's sync time.
//
//   cache_bench [--suite=all|memory|ingest] [--configmaps=100000] [--podlikes=20000]
//               [--clients=8] [--repo=DIR] [--json]
//
// Single-threaded apart from the loader threads (each with its own share of the names).
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/cache/objects.h"
#include "bench/report.h"
#include "nlohmann/json.hpp"
#include "runtime/apiserver/server.h"
#include "runtime/cache/object.h"
#include "runtime/cache/store.h"
#include "runtime/common/status_macros.h"
#include "runtime/kube/api_status.h"
#include "runtime/kube/client.h"
#include "runtime/kube/kubeconfig.h"
#include "runtime/kube/rest_client.h"
#include "simdjson.h"

#ifndef CACHE_BENCH_DEFAULT_SUITE
#define CACHE_BENCH_DEFAULT_SUITE "all"
#endif

namespace ctrlhost::bench {
namespace {

struct Flags {
  std::string suite = CACHE_BENCH_DEFAULT_SUITE;
  int64_t configmaps = 100000;
  int64_t podlikes = 20000;
  int clients = 8;
  std::string repo;  // repository root (for the node script and e2e/clients)
};

absl::StatusOr<Flags> ParseFlags(const std::vector<std::string>& args) {
  Flags flags;
  for (const std::string& arg : args) {
    absl::string_view a = arg;
    auto value = [&](absl::string_view name) -> std::optional<std::string> {
      const std::string prefix = absl::StrCat("--", name, "=");
      if (a.substr(0, prefix.size()) != prefix) return std::nullopt;
      return std::string(a.substr(prefix.size()));
    };
    if (auto v = value("suite")) {
      flags.suite = *v;
      if (flags.suite != "all" && flags.suite != "memory" && flags.suite != "ingest") {
        return absl::InvalidArgumentError("--suite must be all, memory or ingest");
      }
    } else if (auto v = value("configmaps")) {
      if (!absl::SimpleAtoi(*v, &flags.configmaps) || flags.configmaps < 0) {
        return absl::InvalidArgumentError("bad --configmaps");
      }
    } else if (auto v = value("podlikes")) {
      if (!absl::SimpleAtoi(*v, &flags.podlikes) || flags.podlikes < 0) {
        return absl::InvalidArgumentError("bad --podlikes");
      }
    } else if (auto v = value("clients")) {
      if (!absl::SimpleAtoi(*v, &flags.clients) || flags.clients < 1) {
        return absl::InvalidArgumentError("bad --clients");
      }
    } else if (auto v = value("repo")) {
      flags.repo = *v;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown argument ", arg));
    }
  }
  if (flags.repo.empty()) {
    const char* ws = getenv("BUILD_WORKSPACE_DIRECTORY");  // set by `bazel run`
    flags.repo = ws != nullptr ? ws : std::filesystem::current_path().string();
  }
  return flags;
}

// One kind under test.
struct Kind {
  std::string label;  // "ConfigMap"
  kube::ResourceRef ref;
  std::string node_group_version;  // informer_memory.js argument
  int64_t count = 0;
};

absl::Status SetUp(kube::Client& client) {
  kube::ResourceRef ns{.version = "v1", .resource = "namespaces"};
  absl::StatusOr<std::string> created =
      client.Create(ns, absl::StrCat(R"({"apiVersion":"v1","kind":"Namespace","metadata":)",
                                     R"({"name":")", kNamespace, R"("}})"));
  if (!created.ok() && !kube::IsAlreadyExists(created.status())) return created.status();
  const std::string crd =
      nlohmann::json{
          {"apiVersion", "apiextensions.k8s.io/v1"},
          {"kind", "CustomResourceDefinition"},
          {"metadata", {{"name", absl::StrCat("podlikes.", kGroup)}}},
          {"spec",
           {{"group", kGroup},
            {"scope", "Namespaced"},
            {"names",
             {{"plural", "podlikes"},
              {"singular", "podlike"},
              {"kind", "PodLike"},
              {"listKind", "PodLikeList"}}},
            {"versions",
             {{{"name", "v1"},
               {"served", true},
               {"storage", true},
               {"schema",
                {{"openAPIV3Schema",
                  {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}}}}}}}}}}
          .dump();
  kube::ResourceRef crds{
      .group = "apiextensions.k8s.io", .version = "v1", .resource = "customresourcedefinitions"};
  created = client.Create(crds, crd);
  if (!created.ok() && !kube::IsAlreadyExists(created.status())) return created.status();
  // Bounded wait until the new resource is served.
  kube::ResourceRef podlikes{
      .group = kGroup, .version = "v1", .resource = "podlikes", .namespace_name = kNamespace};
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (true) {
    kube::ListOptions one;
    one.limit = 1;
    absl::StatusOr<kube::ObjectList> list = client.ListPage(podlikes, one, "");
    if (list.ok()) return absl::OkStatus();
    if (absl::Now() > deadline) return list.status();
    absl::SleepFor(absl::Milliseconds(50));  // polling a condition with a bounded deadline
  }
}

// Creates kind.count objects from `clients` threads. Returns the first error, if any.
absl::Status Load(kube::Client& client, const Kind& kind, int clients,
                  const std::function<std::string(int64_t)>& make) {
  std::atomic<int64_t> next{0};
  std::vector<absl::Status> errors(clients);
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      for (int64_t i = next++; i < kind.count; i = next++) {
        absl::StatusOr<std::string> r = client.Create(kind.ref, make(i));
        if (!r.ok() && !kube::IsAlreadyExists(r.status())) {
          errors[c] = r.status();
          return;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : errors) RETURN_IF_ERROR(s);
  return absl::OkStatus();
}

size_t HeapInUse() {
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

// Walks every value of an On-Demand document (what a full parse has to touch).
uint64_t Walk(simdjson::ondemand::value value) {
  uint64_t n = 1;
  switch (value.type().value_unsafe()) {
    case simdjson::ondemand::json_type::object:
      for (auto field : value.get_object()) {
        n += field.unescaped_key().value_unsafe().size();
        n += Walk(field.value().value_unsafe());
      }
      break;
    case simdjson::ondemand::json_type::array:
      for (auto element : value.get_array()) n += Walk(element.value_unsafe());
      break;
    case simdjson::ondemand::json_type::string:
      n += value.get_string().value_unsafe().size();
      break;
    case simdjson::ondemand::json_type::number:
      n += static_cast<uint64_t>(value.get_double().value_unsafe() != 0);
      break;
    case simdjson::ondemand::json_type::boolean:
      n += value.get_bool().value_unsafe() ? 1 : 0;
      break;
    case simdjson::ondemand::json_type::null:
      break;
  }
  return n;
}

struct NodeResult {
  int64_t objects = 0;
  double heap_per_object = 0;
  double sync_ms = 0;
};

absl::StatusOr<NodeResult> RunNodeInformer(const Flags& flags, const std::string& kubeconfig,
                                           const Kind& kind) {
  const std::string script = flags.repo + "/bench/cache/informer_memory.js";
  const std::string client_dir = flags.repo + "/e2e/clients";
  if (!std::filesystem::exists(script) ||
      !std::filesystem::exists(client_dir + "/node_modules/@kubernetes/client-node")) {
    return absl::FailedPreconditionError(
        absl::StrCat("need ", script, " and ", client_dir,
                     "/node_modules/@kubernetes/client-node (tools/setup; --repo=DIR)"));
  }
  const std::string command = absl::StrCat(
      "KUBECONFIG='", kubeconfig, "' node --expose-gc --max-old-space-size=8192 '", script, "' '",
      client_dir, "' '", kind.node_group_version, "' '", kind.ref.resource, "' '", kNamespace, "'");
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return absl::InternalError("popen(node) failed");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  const int rc = pclose(pipe);
  if (rc != 0) return absl::InternalError(absl::StrCat("node exited with status ", rc));
  nlohmann::json j = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("objects")) {
    return absl::DataLossError(absl::StrCat("unexpected node output: ", out));
  }
  NodeResult r;
  r.objects = j.value("objects", int64_t{0});
  r.heap_per_object = j.value("heap_per_object", 0.0);
  r.sync_ms = j.value("sync_ms", 0.0);
  return r;
}

// Runs `command` through the shell and returns its standard output; an error when it fails.
absl::StatusOr<std::string> RunCommand(const std::string& command, const std::string& what) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return absl::InternalError(absl::StrCat("popen(", what, ") failed"));
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  const int rc = pclose(pipe);
  if (rc != 0) return absl::InternalError(absl::StrCat(what, " exited with status ", rc));
  return out;
}

struct ClientGoResult {
  int64_t objects = 0;
  double heap_per_object = 0;
};

// The client-go informer baseline: bench/shared_cache/clientgo/main.go's `memory` command (one
// typed informer, synced; Go heap in use after a forced GC, before and after), built against the
// client-go of Kubernetes 1.20.2 by bench/shared_cache/clientgo/build (cached by content).
absl::StatusOr<ClientGoResult> RunClientGoInformer(const Flags& flags,
                                                   const std::string& kubeconfig,
                                                   const Kind& kind) {
  const std::string build = flags.repo + "/bench/shared_cache/clientgo/build";
  if (!std::filesystem::exists(build)) {
    return absl::FailedPreconditionError(absl::StrCat("need ", build, " (--repo=DIR)"));
  }
  ASSIGN_OR_RETURN(std::string binary, RunCommand(absl::StrCat("'", build, "'"), build));
  binary = std::string(absl::StripAsciiWhitespace(binary));
  ASSIGN_OR_RETURN(
      std::string out,
      RunCommand(absl::StrCat("'", binary, "' memory --kubeconfig='", kubeconfig,
                              "' --kind=", kind.ref.resource, " --namespace=", kNamespace),
                 "clientgo-baseline memory"));
  ClientGoResult r;
  double heap_bytes = -1;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ');
    if (words.size() != 2) continue;
    if (words[0] == "objects" && !absl::SimpleAtoi(words[1], &r.objects)) r.objects = 0;
    if (words[0] == "heap_bytes" && !absl::SimpleAtod(words[1], &heap_bytes)) heap_bytes = -1;
  }
  if (r.objects <= 0 || heap_bytes < 0) {
    return absl::DataLossError(absl::StrCat("unexpected clientgo-baseline output: ", out));
  }
  r.heap_per_object = heap_bytes / static_cast<double>(r.objects);
  return r;
}

absl::Status RunKind(const Flags& flags, kube::Client& client, const std::string& kubeconfig,
                     const Kind& kind, Reporter& reporter) {
  const bool memory = flags.suite != "ingest";
  const bool ingest = flags.suite != "memory";

  // Fetch the list (the bytes every figure below works from).
  Stopwatch http_watch;
  ASSIGN_OR_RETURN(kube::ObjectList list, client.List(kind.ref));
  const double list_seconds = http_watch.Seconds();
  if (static_cast<int64_t>(list.items.size()) != kind.count) {
    return absl::InternalError(absl::StrCat(kind.label, ": listed ", list.items.size(),
                                            " objects, expected ", kind.count));
  }
  size_t json_bytes = 0;
  for (const std::string& item : list.items) json_bytes += item.size();
  const double objects = static_cast<double>(list.items.size());
  const double json_per_object = json_bytes / objects;

  // Ours: parse + Replace, heap measured around it.
  const size_t heap_before = HeapInUse();
  cache::Store store;
  double first_parse_seconds = 0;
  Stopwatch ingest_watch;
  {
    cache::ObjectParser parser;
    std::vector<cache::ObjectPtr> parsed;
    parsed.reserve(list.items.size());
    for (const std::string& item : list.items) {
      ASSIGN_OR_RETURN(cache::ObjectPtr object, parser.Parse(item));
      parsed.push_back(std::move(object));
    }
    first_parse_seconds = ingest_watch.Seconds();
    store.Replace(std::move(parsed), list.resource_version);
  }
  const double ingest_seconds = ingest_watch.Seconds();
  const size_t heap_after = HeapInUse();
  const double heap_per_object =
      (static_cast<double>(heap_after) - static_cast<double>(heap_before)) / objects;

  // Ingest rate: alternate ours (a fresh store each round, destroyed after) and simdjson
  // On-Demand walking every value of the same bytes (padded copies made outside the timing);
  // the best of kRounds each (ours also counts the first, heap-measured pass), so neither side
  // gets the warmer caches and a burst of load on a shared machine hits one round, not both.
  double best_ingest = ingest_seconds;
  double best_parse = first_parse_seconds;  // ObjectParser alone, of the round with the best total
  double simdjson_seconds = 0;
  if (ingest) {
    std::vector<simdjson::padded_string> padded;
    padded.reserve(list.items.size());
    for (const std::string& item : list.items) padded.emplace_back(item);
    simdjson::ondemand::parser sj_parser;
    constexpr int kRounds = 5;
    for (int round = 0; round < kRounds; ++round) {
      uint64_t sink = 0;
      Stopwatch sj_watch;
      for (const simdjson::padded_string& p : padded) {
        simdjson::ondemand::document doc;
        simdjson::ondemand::value root;
        if (sj_parser.iterate(p).get(doc) != simdjson::SUCCESS ||
            doc.get_value().get(root) != simdjson::SUCCESS) {
          return absl::DataLossError("simdjson rejected a listed object");
        }
        sink += Walk(root);
      }
      const double sj = sj_watch.Seconds();
      if (sink == 0) return absl::InternalError("simdjson walk saw nothing");
      simdjson_seconds = round == 0 ? sj : std::min(simdjson_seconds, sj);
      if (round + 1 == kRounds) break;
      cache::Store round_store;
      Stopwatch ours_watch;
      cache::ObjectParser parser;
      std::vector<cache::ObjectPtr> parsed;
      parsed.reserve(list.items.size());
      for (const std::string& item : list.items) {
        ASSIGN_OR_RETURN(cache::ObjectPtr object, parser.Parse(item));
        parsed.push_back(std::move(object));
      }
      const double parse_seconds = ours_watch.Seconds();
      round_store.Replace(std::move(parsed), list.resource_version);
      const double total = ours_watch.Seconds();
      if (total < best_ingest) {
        best_ingest = total;
        best_parse = parse_seconds;
      }
    }
  }

  absl::StatusOr<NodeResult> node = RunNodeInformer(flags, kubeconfig, kind);
  if (!node.ok()) {
    std::cerr << "cache_bench: client-node informer: " << node.status() << "\n";
  } else if (node->objects != kind.count) {
    node = absl::InternalError(absl::StrCat("node informer cached ", node->objects));
  }

  absl::StatusOr<ClientGoResult> clientgo =
      memory ? RunClientGoInformer(flags, kubeconfig, kind)
             : absl::StatusOr<ClientGoResult>(absl::CancelledError("not measured"));
  if (memory && !clientgo.ok()) {
    std::cerr << "cache_bench: client-go informer: " << clientgo.status() << "\n";
  } else if (memory && clientgo->objects != kind.count) {
    clientgo = absl::InternalError(absl::StrCat("client-go informer cached ", clientgo->objects));
  }

  const std::string what =
      absl::StrFormat("%s (%d, stored JSON %.0f B)", kind.label, kind.count, json_per_object);
  if (memory) {
    const double limit = 1.3 * json_per_object + 200;
    Figure f;
    f.metric = absl::StrCat("heap per cached ", what);
    f.value = heap_per_object;
    f.unit = "B";
    f.baseline = json_per_object;
    f.target = absl::StrFormat("<= 1.3x JSON + 200 B (%.0f B)", limit);
    f.met = heap_per_object <= limit;
    reporter.Add(f);
    Figure s;
    s.metric = absl::StrCat("  Store::MemoryBytes per ", kind.label);
    s.value = static_cast<double>(store.MemoryBytes()) / objects;
    s.unit = "B";
    reporter.Add(s);
    Figure k;
    k.metric = absl::StrCat("  JSON kept per ", kind.label, " (managedFields stripped)");
    k.value = static_cast<double>(store.JsonBytes()) / objects;
    k.unit = "B";
    reporter.Add(k);
    Figure n;
    n.metric = absl::StrCat("heap per ", kind.label, " vs client-node informer");
    n.value = heap_per_object;
    n.unit = "B";
    if (node.ok()) n.baseline = node->heap_per_object;
    n.target = "<= 0.2x";
    n.met = node.ok() && heap_per_object <= 0.2 * node->heap_per_object;
    reporter.Add(n);
    Figure g;
    g.metric = absl::StrCat("heap per ", kind.label, " vs client-go informer (typed ",
                            kind.label == "ConfigMap" ? "ConfigMap" : "Pod", ")");
    g.value = heap_per_object;
    g.unit = "B";
    if (clientgo.ok()) g.baseline = clientgo->heap_per_object;
    g.target = "<= 0.5x";
    g.met = clientgo.ok() && heap_per_object <= 0.5 * clientgo->heap_per_object;
    reporter.Add(g);
  }
  if (ingest) {
    const double mb = json_bytes / 1e6;
    Figure r;
    r.metric = absl::StrCat("ingest parse+Replace ", what, " vs simdjson On-Demand");
    r.value = mb / best_ingest;
    r.unit = "MB/s";
    r.baseline = mb / simdjson_seconds;
    r.target = ">= 0.25x";
    r.met = r.value >= 0.25 * *r.baseline;
    reporter.Add(r);
    Figure p;
    p.metric = absl::StrCat("  ingest per ", kind.label);
    p.value = best_ingest * 1e6 / objects;
    p.unit = "us";
    reporter.Add(p);
    Figure pp;
    pp.metric = absl::StrCat("  of which ObjectParser::Parse per ", kind.label);
    pp.value = best_parse * 1e6 / objects;
    pp.unit = "us";
    reporter.Add(pp);
    Figure l;
    l.metric = absl::StrCat("  kube::Client::List over HTTPS, ", kind.label);
    l.value = mb / list_seconds;
    l.unit = "MB/s";
    reporter.Add(l);
    Figure h;
    const double ours_ms = (list_seconds + ingest_seconds) * 1e3;
    h.metric = absl::StrCat("list over HTTPS + ingest ", kind.label, " vs client-node sync");
    h.value = ours_ms;
    h.unit = "ms";
    if (node.ok()) {
      h.baseline = node->sync_ms;
      h.ratio = node->sync_ms / ours_ms;  // speed-up: higher is better
    }
    h.target = ">= 5x faster";
    h.met = node.ok() && node->sync_ms >= 5 * ours_ms;
    reporter.Add(h);
  }
  return absl::OkStatus();
}

absl::Status Run(const Flags& flags, Reporter& reporter) {
  const char* tmp = getenv("TMPDIR");
  std::string templ = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/cache_bench.XXXXXX");
  if (mkdtemp(templ.data()) == nullptr) return absl::InternalError("mkdtemp failed");
  const std::string data_dir = templ;
  absl::Status status = [&]() -> absl::Status {
    apiserver::ApiServerOptions options;
    options.data_dir = data_dir;
    options.port = 0;
    options.sync_full = false;  // loading speed; the benchmark measures the client side
    ASSIGN_OR_RETURN(std::unique_ptr<apiserver::ApiServer> server,
                     apiserver::ApiServer::Start(options));
    const std::string kubeconfig = data_dir + "/kubeconfig";
    ASSIGN_OR_RETURN(kube::RestConfig config, kube::LoadKubeconfigFile(kubeconfig));
    kube::RestClientOptions rest_options;
    rest_options.qps = 0;  // unlimited: the loader is the only client
    rest_options.max_idle_connections = static_cast<size_t>(flags.clients) + 2;
    rest_options.timeout = absl::Minutes(2);  // a whole-list page of 100k objects
    ASSIGN_OR_RETURN(auto rest, kube::RestClient::Create(config, rest_options));
    kube::Client client(rest.get());
    RETURN_IF_ERROR(SetUp(client));

    Kind configmaps{
        .label = "ConfigMap",
        .ref = {.version = "v1", .resource = "configmaps", .namespace_name = kNamespace},
        .node_group_version = "v1",
        .count = flags.configmaps};
    Kind podlikes{.label = "PodLike",
                  .ref = {.group = kGroup,
                          .version = "v1",
                          .resource = "podlikes",
                          .namespace_name = kNamespace},
                  .node_group_version = absl::StrCat(kGroup, "/v1"),
                  .count = flags.podlikes};
    Stopwatch load_watch;
    RETURN_IF_ERROR(Load(client, configmaps, flags.clients, &ConfigMapJson));
    // An object whose uid the PodLikes' controller reference carries: a PodLike whose owner
    // does not exist is deleted by the API server's garbage collector (which goes by uid), and
    // the list would find none. The embedded server serves no ReplicaSets, so a Deployment.
    const kube::ResourceRef deployments{
        .group = "apps", .version = "v1", .resource = "deployments", .namespace_name = kNamespace};
    ASSIGN_OR_RETURN(
        const std::string owner,
        client.Create(deployments,
                      absl::StrCat(R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":)",
                                   R"({"name":"web-7d9f8c6b5","namespace":")", kNamespace,
                                   R"("},"spec":{"selector":{"matchLabels":{"app":"web"}},)",
                                   R"("template":{"metadata":{"labels":{"app":"web"}},)",
                                   R"("spec":{"containers":[{"name":"app","image":"app"}]}}}})")));
    const std::string owner_uid = nlohmann::json::parse(owner)["metadata"]["uid"];
    RETURN_IF_ERROR(Load(client, podlikes, flags.clients,
                         [&](int64_t i) { return PodLikeJson(i, owner_uid); }));
    std::cerr << absl::StrFormat("cache_bench: loaded %d ConfigMaps and %d PodLikes in %.1f s\n",
                                 flags.configmaps, flags.podlikes, load_watch.Seconds());
    if (configmaps.count > 0) {
      RETURN_IF_ERROR(RunKind(flags, client, kubeconfig, configmaps, reporter));
    }
    if (podlikes.count > 0) {
      RETURN_IF_ERROR(RunKind(flags, client, kubeconfig, podlikes, reporter));
    }
    server->Stop();
    return absl::OkStatus();
  }();
  std::error_code ignored;
  std::filesystem::remove_all(data_dir, ignored);
  return status;
}

}  // namespace
}  // namespace ctrlhost::bench

int main(int argc, char** argv) {
  const std::string suite = CACHE_BENCH_DEFAULT_SUITE;
  ctrlhost::bench::Reporter reporter(
      suite == "memory" ? "cache-memory" : (suite == "ingest" ? "ingest" : "cache"), argc, argv);
  absl::StatusOr<ctrlhost::bench::Flags> flags = ctrlhost::bench::ParseFlags(reporter.args());
  if (!flags.ok()) {
    std::cerr << "cache_bench: " << flags.status() << "\n";
    return 2;
  }
  absl::Status status = ctrlhost::bench::Run(*flags, reporter);
  if (!status.ok()) {
    std::cerr << "cache_bench: " << status << "\n";
    reporter.Finish();
    return 1;
  }
  return reporter.Finish();
}
