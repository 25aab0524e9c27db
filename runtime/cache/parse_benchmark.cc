// Metadata extraction from a Pod-like object (~5 KB, half of it managedFields) with each JSON
// library Debian offers, to choose the cache's parser (README.md "Why simdjson DOM").
//
//   bazel run -c opt //runtime/cache:parse_benchmark
#include <malloc.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "nlohmann/json.hpp"
#include "rapidjson/document.h"
#include "runtime/cache/object.h"
#include "runtime/cache/store.h"
#include "simdjson.h"

namespace ctrlhost::cache {
namespace {

std::string PodJson(int index = 0) {
  std::string managed;
  for (int i = 0; i < 12; ++i) {
    if (i > 0) managed += ",";
    absl::StrAppend(
        &managed, R"({"manager":"controller-)", i,
        R"(","operation":"Update","apiVersion":"v1","time":"2026-01-01T00:00:00Z",)",
        R"("fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{"f:app":{}}},)",
        R"("f:spec":{"f:containers":{"k:{\"name\":\"c\"}":{"f:image":{}}}}}})");
  }
  std::string containers;
  for (int i = 0; i < 4; ++i) {
    if (i > 0) containers += ",";
    absl::StrAppend(
        &containers, R"({"name":"c)", i,
        R"(","image":"registry.example.com/team/app:1.2.3","ports":[{"containerPort":)", 8080 + i,
        R"(,"protocol":"TCP"}],"env":[{"name":"A","value":"1"},{"name":"B","value":"2"}],)",
        R"("resources":{"limits":{"cpu":"500m","memory":"256Mi"}}})");
  }
  return absl::StrCat(
      R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-7d9f8b6c5-)", index, R"(",)",
      R"("namespace":"default","uid":"0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0",)",
      R"("resourceVersion":"123456","generation":1,"creationTimestamp":"2026-01-01T00:00:00Z",)",
      R"("labels":{"app":"web","pod-template-hash":"7d9f8b6c5","tier":"frontend"},)",
      R"("ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-7d9f8b6c5",)",
      R"("uid":"11111111-2222-3333-4444-555555555555","controller":true}],)",
      R"("managedFields":[)", managed, R"(]},"spec":{"containers":[)", containers,
      R"(],"nodeName":"node-1"},"status":{"phase":"Running","podIP":"10.0.0.7"}})");
}

const std::string& Pod() {
  static const std::string* pod = new std::string(PodJson());
  return *pod;
}

void BM_ObjectParser_SimdjsonDom_Strip(benchmark::State& state) {
  ObjectParser parser;
  for (auto _ : state) benchmark::DoNotOptimize(parser.Parse(Pod()));
  state.SetBytesProcessed(state.iterations() * Pod().size());
}
BENCHMARK(BM_ObjectParser_SimdjsonDom_Strip);

void BM_ObjectParser_SimdjsonDom_NoStrip(benchmark::State& state) {
  ObjectParser parser(ParseOptions{false, false});
  for (auto _ : state) benchmark::DoNotOptimize(parser.Parse(Pod()));
  state.SetBytesProcessed(state.iterations() * Pod().size());
}
BENCHMARK(BM_ObjectParser_SimdjsonDom_NoStrip);

void BM_Meta_SimdjsonOnDemand(benchmark::State& state) {
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded(Pod());
  for (auto _ : state) {
    ObjectMeta meta;
    simdjson::ondemand::document doc;
    if (parser.iterate(padded).get(doc)) state.SkipWithError("parse");
    simdjson::ondemand::object m;
    if (doc["metadata"].get_object().get(m)) state.SkipWithError("metadata");
    for (auto field : m) {
      std::string_view key;
      if (field.unescaped_key().get(key)) break;
      std::string_view s;
      if (key == "name" && !field.value().get_string().get(s)) meta.name = std::string(s);
      if (key == "namespace" && !field.value().get_string().get(s)) meta.namespace_ = s;
      if (key == "uid" && !field.value().get_string().get(s)) meta.uid = std::string(s);
      if (key == "resourceVersion" && !field.value().get_string().get(s)) {
        meta.resource_version = std::string(s);
      }
      if (key == "labels") {
        simdjson::ondemand::object labels;
        if (field.value().get_object().get(labels)) break;
        for (auto label : labels) {
          std::string_view k, v;
          if (label.unescaped_key().get(k) || label.value().get_string().get(v)) break;
          meta.labels.emplace_back(std::string(k), std::string(v));
        }
      }
    }
    benchmark::DoNotOptimize(meta);
  }
  state.SetBytesProcessed(state.iterations() * Pod().size());
}
BENCHMARK(BM_Meta_SimdjsonOnDemand);

void BM_Meta_Rapidjson(benchmark::State& state) {
  for (auto _ : state) {
    rapidjson::Document doc;
    doc.Parse(Pod().data(), Pod().size());
    ObjectMeta meta;
    const auto& m = doc["metadata"];
    meta.name = m["name"].GetString();
    meta.namespace_ = m["namespace"].GetString();
    meta.uid = m["uid"].GetString();
    meta.resource_version = m["resourceVersion"].GetString();
    for (const auto& l : m["labels"].GetObject()) {
      meta.labels.emplace_back(l.name.GetString(), l.value.GetString());
    }
    benchmark::DoNotOptimize(meta);
  }
  state.SetBytesProcessed(state.iterations() * Pod().size());
}
BENCHMARK(BM_Meta_Rapidjson);

void BM_Meta_Nlohmann(benchmark::State& state) {
  for (auto _ : state) {
    nlohmann::json doc = nlohmann::json::parse(Pod());
    ObjectMeta meta;
    const auto& m = doc["metadata"];
    meta.name = m["name"].get<std::string>();
    meta.namespace_ = m["namespace"].get<std::string>();
    meta.uid = m["uid"].get<std::string>();
    meta.resource_version = m["resourceVersion"].get<std::string>();
    for (const auto& [k, v] : m["labels"].items())
      meta.labels.emplace_back(k, v.get<std::string>());
    benchmark::DoNotOptimize(meta);
  }
  state.SetBytesProcessed(state.iterations() * Pod().size());
}
BENCHMARK(BM_Meta_Nlohmann);

std::string ConfigMapJson(int index) {
  return absl::StrCat(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"config-)", index,
                      R"(","namespace":"default","uid":"0b1c2d3e-4f50-6172-8394-)", index,
                      R"(","resourceVersion":")", 1000 + index,
                      R"(","labels":{"app":"web"}},"data":{"payload":")", std::string(800, 'x'),
                      R"("}})");
}

// A ConfigMap as the API server stores it (what the `ingest` benchmark lists): two labels, a
// 700-character value and the managedFields entry recorded on create.
std::string ServerConfigMapJson(int index) {
  return absl::StrCat(
      R"({"apiVersion":"v1","data":{"config.yaml":")", std::string(700, 'y'),
      R"(","mode":"fast"},"kind":"ConfigMap","metadata":{"creationTimestamp":)",
      R"("2026-11-22T01:00:00Z","labels":{"app":"bench","shard":")", index % 16,
      R"("},"managedFields":[{"apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":)",
      R"({"f:data":{".":{},"f:config.yaml":{},"f:mode":{}},"f:metadata":{"f:labels":)",
      R"({".":{},"f:app":{},"f:shard":{}}}},"manager":"ctrlhost-bench","operation":"Update",)",
      R"("time":"2026-11-22T01:00:00Z"}],"name":"cm-)", 100000 + index,
      R"(","namespace":"bench","resourceVersion":")", 1000 + index,
      R"(","uid":"0b1c2d3e-4f50-6172-8394-)", 100000000 + index, R"("}})");
}

const std::string& ServerConfigMap() {
  static const std::string* cm = new std::string(ServerConfigMapJson(7));
  return *cm;
}

void BM_ServerConfigMap_ObjectParser(benchmark::State& state) {
  ObjectParser parser;
  for (auto _ : state) benchmark::DoNotOptimize(parser.Parse(ServerConfigMap()));
  state.SetBytesProcessed(state.iterations() * ServerConfigMap().size());
}
BENCHMARK(BM_ServerConfigMap_ObjectParser);

void BM_ServerConfigMap_DomParseOnly(benchmark::State& state) {
  simdjson::dom::parser parser;
  for (auto _ : state) {
    simdjson::dom::element doc;
    if (parser.parse(ServerConfigMap().data(), ServerConfigMap().size(), true).get(doc)) {
      state.SkipWithError("parse");
    }
    benchmark::DoNotOptimize(doc);
  }
  state.SetBytesProcessed(state.iterations() * ServerConfigMap().size());
}
BENCHMARK(BM_ServerConfigMap_DomParseOnly);

// Store::Replace of N parsed ConfigMaps into an empty store (an initial list).
void BM_Store_ReplaceInitialList(benchmark::State& state) {
  ObjectParser parser;
  std::vector<ObjectPtr> objects;
  for (int i = 0; i < state.range(0); ++i) objects.push_back(*parser.Parse(ServerConfigMapJson(i)));
  for (auto _ : state) {
    Store store;
    benchmark::DoNotOptimize(store.Replace(objects, "1"));
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Store_ReplaceInitialList)->Arg(20000);

// Heap bytes per cached object (glibc's allocated-bytes counter before and after filling a
// store), next to the wire size and the stored (stripped) JSON size.
void StoreMemory(benchmark::State& state, std::string (*make)(int)) {
  const int count = static_cast<int>(state.range(0));
  std::vector<std::string> wire;
  size_t wire_bytes = 0;
  for (int i = 0; i < count; ++i) {
    wire.push_back(make(i));
    wire_bytes += wire.back().size();
  }
  for (auto _ : state) {
    ObjectParser parser;
    const size_t before = mallinfo2().uordblks;
    auto store = std::make_unique<Store>();
    for (const std::string& json : wire) {
      auto object = parser.Parse(json);
      if (!object.ok()) state.SkipWithError("parse");
      store->Upsert(*std::move(object));
    }
    const size_t after = mallinfo2().uordblks;
    state.counters["wire_B_per_obj"] = static_cast<double>(wire_bytes) / count;
    state.counters["stored_json_B_per_obj"] = static_cast<double>(store->JsonBytes()) / count;
    state.counters["heap_B_per_obj"] = static_cast<double>(after - before) / count;
    state.counters["heap_over_stored_json_B"] =
        static_cast<double>(after - before - store->JsonBytes()) / count;
  }
}
BENCHMARK_CAPTURE(StoreMemory, pods, &PodJson)->Arg(20000)->Iterations(1);
BENCHMARK_CAPTURE(StoreMemory, configmaps, &ConfigMapJson)->Arg(100000)->Iterations(1);

}  // namespace
}  // namespace ctrlhost::cache

BENCHMARK_MAIN();
