// Server-side printing: HumanDuration, every built-in kind's columns and cells, custom resource
// printer columns (typed cells, filters, malformed paths), and Table responses (includeObject,
// Accept negotiation, the pieces long LISTs are streamed in) through the handlers.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/apiserver/handlers_internal.h"
#include "runtime/apiserver/printers.h"
#include "runtime/apiserver/resource_registry.h"
#include "runtime/apiserver/testing/api_test_env.h"

namespace ctrlhost::apiserver {
namespace {

using ::ctrlhost::apiserver::testing::ApiTestEnv;
using ::testing::ElementsAre;

const absl::Time kNow = absl::FromUnixSeconds(1767225600);  // 2026-01-01T00:00:00Z

std::string Ago(absl::Duration d) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", kNow - d, absl::UTCTimeZone());
}

nlohmann::json Meta(const std::string& name, absl::Duration age = absl::Minutes(5)) {
  return {{"name", name}, {"namespace", "ns1"}, {"creationTimestamp", Ago(age)}};
}

// Column names of `printer`, with "*" after the priority-1 ones (shown by -o wide only).
std::vector<std::string> Names(const TablePrinter& printer) {
  std::vector<std::string> out;
  for (const auto& c : printer.ColumnDefinitions()) {
    out.push_back(c["name"].get<std::string>() + (c["priority"] == 1 ? "*" : ""));
  }
  return out;
}

class PrinterTest : public ::testing::Test {
 protected:
  TablePrinter For(const char* group, const char* resource) {
    ResourcePtr r = registry_.Find(group, "v1", resource);
    EXPECT_NE(r, nullptr) << group << "/" << resource;
    return TablePrinter::For(*r);
  }
  // Cells of `obj` printed as `group/resource`; also checks one cell per column.
  nlohmann::json Cells(const char* group, const char* resource, const nlohmann::json& obj) {
    TablePrinter p = For(group, resource);
    nlohmann::json cells = p.Cells(obj, obj, kNow);
    EXPECT_EQ(cells.size(), p.ColumnDefinitions().size()) << cells;
    return cells;
  }

  ResourceRegistry registry_;
};

TEST(HumanDurationTest, MatchesApimachinery) {
  const struct {
    absl::Duration d;
    const char* want;
  } cases[] = {
      {absl::Seconds(-3), "<invalid>"},
      {absl::Seconds(-2), "<invalid>"},
      {absl::Milliseconds(-1999), "0s"},  // clock skew of up to 2s reads as now
      {absl::Seconds(-1), "0s"},
      {absl::ZeroDuration(), "0s"},
      {absl::Milliseconds(999), "0s"},
      {absl::Seconds(45), "45s"},
      {absl::Seconds(119), "119s"},
      {absl::Seconds(120), "2m"},
      {absl::Seconds(121), "2m1s"},
      {absl::Seconds(376), "6m16s"},
      {absl::Seconds(599), "9m59s"},
      {absl::Seconds(600), "10m"},
      {absl::Seconds(659), "10m"},
      {absl::Minutes(179), "179m"},
      {absl::Minutes(180), "3h"},
      {absl::Minutes(185), "3h5m"},
      {absl::Minutes(479), "7h59m"},
      {absl::Hours(8), "8h"},
      {absl::Hours(47) + absl::Minutes(59), "47h"},
      {absl::Hours(48), "2d"},
      {absl::Hours(51), "2d3h"},
      {absl::Hours(24 * 8 - 1), "7d23h"},
      {absl::Hours(24 * 8), "8d"},
      {absl::Hours(24 * 400), "400d"},
      {absl::Hours(24 * 730 - 1), "729d"},
      {absl::Hours(24 * 730), "2y"},
      {absl::Hours(24 * (730 + 12)), "2y12d"},
      {absl::Hours(24 * 365 * 8), "8y"},
      {absl::Hours(24 * 365 * 20), "20y"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(HumanDuration(c.d), c.want) << absl::FormatDuration(c.d);
  }
}

TEST(TimestampAgeTest, UnknownAndInvalid) {
  EXPECT_EQ(TimestampAge(nullptr, kNow), "<unknown>");
  EXPECT_EQ(TimestampAge("", kNow), "<unknown>");
  EXPECT_EQ(TimestampAge("0001-01-01T00:00:00Z", kNow), "<unknown>");
  EXPECT_EQ(TimestampAge("yesterday", kNow), "<invalid>");
  EXPECT_EQ(TimestampAge(12, kNow), "<invalid>");
  EXPECT_EQ(TimestampAge(Ago(absl::Hours(51)), kNow), "2d3h");
  EXPECT_EQ(TimestampAge("2025-12-31T23:59:15.123456Z", kNow), "44s");  // MicroTime
  EXPECT_EQ(TimestampAge("2026-01-01T01:00:00+01:00", kNow), "0s");     // offsets
  EXPECT_EQ(TimestampAge(Ago(absl::Seconds(-60)), kNow), "<invalid>");  // future
}

TEST(FormatLabelsTest, LabelsAndSelectors) {
  EXPECT_EQ(FormatLabels(nullptr), "<none>");
  EXPECT_EQ(FormatLabels(nlohmann::json::object()), "<none>");
  EXPECT_EQ(FormatLabels({{"b", "2"}, {"a", "1"}}), "a=1,b=2");
  EXPECT_EQ(FormatLabelSelector(nullptr), "");
  EXPECT_EQ(FormatLabelSelector(nlohmann::json::object()), "");
  EXPECT_EQ(FormatLabelSelector({{"matchLabels", {{"app", "web"}}}}), "app=web");
  EXPECT_EQ(FormatLabelSelector(nlohmann::json::parse(R"({
      "matchLabels": {"tier": "front", "app": "web"},
      "matchExpressions": [
        {"key": "env", "operator": "In", "values": ["prod", "dev"]},
        {"key": "zone", "operator": "NotIn", "values": ["b"]},
        {"key": "legacy", "operator": "DoesNotExist"},
        {"key": "canary", "operator": "Exists", "values": []}]})")),
            "app=web,canary,env in (dev,prod),!legacy,tier=front,zone notin (b)");
  for (const char* bad : {R"("x")", R"({"matchLabels": {"a": 1}})", R"({"matchLabels": []})",
                          R"({"matchExpressions": [{"key": "a", "operator": "Like"}]})",
                          R"({"matchExpressions": [{"key": "a", "operator": "In"}]})",
                          R"({"matchExpressions": [{"key": "a", "operator": "Exists",
                                                   "values": ["x"]}]})",
                          R"({"matchExpressions": [{"operator": "Exists"}]})",
                          R"({"matchExpressions": [{"key": "a", "operator": "In",
                                                   "values": [1]}]})",
                          R"({"matchExpressions": {}})"}) {
    EXPECT_EQ(FormatLabelSelector(nlohmann::json::parse(bad)), "<invalid>") << bad;
  }
}

TEST_F(PrinterTest, Namespace) {
  EXPECT_THAT(Names(For("", "namespaces")), ElementsAre("Name", "Status", "Age"));
  nlohmann::json ns = {{"metadata", Meta("dev", absl::Hours(51))},
                       {"status", {{"phase", "Terminating"}}}};
  EXPECT_EQ(Cells("", "namespaces", ns), nlohmann::json({"dev", "Terminating", "2d3h"}));
}

TEST_F(PrinterTest, ConfigMapCountsDataAndBinaryData) {
  EXPECT_THAT(Names(For("", "configmaps")), ElementsAre("Name", "Data", "Age"));
  nlohmann::json cm = {{"metadata", Meta("cfg", absl::Seconds(376))},
                       {"data", {{"a", "1"}, {"b", "2"}}},
                       {"binaryData", {{"c", "AA=="}}}};
  EXPECT_EQ(Cells("", "configmaps", cm), nlohmann::json({"cfg", 3, "6m16s"}));
  EXPECT_EQ(Cells("", "configmaps", {{"metadata", Meta("e")}}), nlohmann::json({"e", 0, "5m"}));
}

TEST_F(PrinterTest, Secret) {
  EXPECT_THAT(Names(For("", "secrets")), ElementsAre("Name", "Type", "Data", "Age"));
  nlohmann::json s = {{"metadata", Meta("tls")},
                      {"type", "kubernetes.io/tls"},
                      {"data", {{"tls.crt", "eA=="}, {"tls.key", "eA=="}}}};
  EXPECT_EQ(Cells("", "secrets", s), nlohmann::json({"tls", "kubernetes.io/tls", 2, "5m"}));
  // No type: Kubernetes would have defaulted it to Opaque.
  EXPECT_EQ(Cells("", "secrets", {{"metadata", Meta("o")}}),
            nlohmann::json({"o", "Opaque", 0, "5m"}));
}

TEST_F(PrinterTest, ServiceAccount) {
  EXPECT_THAT(Names(For("", "serviceaccounts")), ElementsAre("Name", "Secrets", "Age"));
  nlohmann::json sa = {{"metadata", Meta("default")}, {"secrets", {{{"name", "tok"}}}}};
  EXPECT_EQ(Cells("", "serviceaccounts", sa), nlohmann::json({"default", 1, "5m"}));
}

TEST_F(PrinterTest, Service) {
  EXPECT_THAT(Names(For("", "services")), ElementsAre("Name", "Type", "Cluster-IP", "External-IP",
                                                      "Port(s)", "Age", "Selector*"));
  nlohmann::json svc = nlohmann::json::parse(R"({
      "spec": {"type": "NodePort", "clusterIP": "10.0.0.9", "clusterIPs": ["10.0.0.9", "fd00::9"],
               "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"},
                         {"port": 53, "protocol": "UDP"}],
               "selector": {"app": "web", "tier": "front"}}})");
  svc["metadata"] = Meta("web");
  EXPECT_EQ(Cells("", "services", svc),
            nlohmann::json({"web", "NodePort", "10.0.0.9", "<none>", "80:30080/TCP,53/UDP", "5m",
                            "app=web,tier=front"}));
  // Defaults: ClusterIP type, TCP ports, no IP yet, no selector.
  nlohmann::json bare = {{"metadata", Meta("bare")}, {"spec", {{"ports", {{{"port", 8080}}}}}}};
  EXPECT_EQ(Cells("", "services", bare),
            nlohmann::json({"bare", "ClusterIP", "<none>", "<none>", "8080/TCP", "5m", "<none>"}));
  nlohmann::json no_ports = {
      {"metadata", Meta("np")},
      {"spec", {{"type", "ClusterIP"}, {"clusterIP", "None"}, {"externalIPs", {"1.2.3.4"}}}}};
  EXPECT_EQ(Cells("", "services", no_ports),
            nlohmann::json({"np", "ClusterIP", "None", "1.2.3.4", "<none>", "5m", "<none>"}));
}

TEST_F(PrinterTest, ServiceExternalIps) {
  auto external = [this](const char* spec_and_status) {
    nlohmann::json svc = nlohmann::json::parse(spec_and_status);
    svc["metadata"] = Meta("s");
    return Cells("", "services", svc)[3];
  };
  EXPECT_EQ(external(R"({"spec": {"type": "LoadBalancer"}})"), "<pending>");
  // Sorted and unique; IPs before hostnames of the same entry; not cut short (server side is
  // always wide).
  EXPECT_EQ(external(R"({"spec": {"type": "LoadBalancer"}, "status": {"loadBalancer": {"ingress": [
                {"ip": "203.0.113.20"}, {"hostname": "lb.example.com"}, {"ip": "203.0.113.10"},
                {"ip": "203.0.113.10", "hostname": "ignored"}]}}})"),
            "203.0.113.10,203.0.113.20,lb.example.com");
  EXPECT_EQ(external(R"({"spec": {"type": "LoadBalancer", "externalIPs": ["5.6.7.8"]},
                          "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}})"),
            "1.2.3.4,5.6.7.8");
  EXPECT_EQ(external(R"({"spec": {"type": "LoadBalancer", "externalIPs": ["5.6.7.8"]}})"),
            "5.6.7.8");
  EXPECT_EQ(external(R"({"spec": {"type": "ExternalName", "externalName": "db.example.com"}})"),
            "db.example.com");
  EXPECT_EQ(external(R"({"spec": {"type": "Weird"}})"), "<unknown>");
}

TEST_F(PrinterTest, Deployment) {
  EXPECT_THAT(Names(For("apps", "deployments")),
              ElementsAre("Name", "Ready", "Up-to-date", "Available", "Age", "Containers*",
                          "Images*", "Selector*"));
  nlohmann::json d = nlohmann::json::parse(R"({
      "spec": {"replicas": 3,
               "selector": {"matchLabels": {"app": "web"}},
               "template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.27"},
                                                   {"name": "log", "image": "busybox"}]}}},
      "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 1}})");
  d["metadata"] = Meta("web", absl::Minutes(185));
  EXPECT_EQ(Cells("apps", "deployments", d), nlohmann::json({"web", "2/3", 3, 1, "3h5m", "web,log",
                                                             "nginx:1.27,busybox", "app=web"}));
  // A new deployment: no status yet, replicas defaulted to 1.
  EXPECT_EQ(Cells("apps", "deployments", {{"metadata", Meta("new")}}),
            nlohmann::json({"new", "0/1", 0, 0, "5m", "", "", ""}));
}

TEST_F(PrinterTest, Lease) {
  EXPECT_THAT(Names(For("coordination.k8s.io", "leases")), ElementsAre("Name", "Holder", "Age"));
  nlohmann::json l = {{"metadata", Meta("ctrlhost-leader")},
                      {"spec", {{"holderIdentity", "host-a_1234"}}}};
  EXPECT_EQ(Cells("coordination.k8s.io", "leases", l),
            nlohmann::json({"ctrlhost-leader", "host-a_1234", "5m"}));
  EXPECT_EQ(Cells("coordination.k8s.io", "leases", {{"metadata", Meta("free")}}),
            nlohmann::json({"free", "", "5m"}));
}

TEST_F(PrinterTest, CustomResourceDefinitionShowsCreatedAt) {
  TablePrinter p = For("apiextensions.k8s.io", "customresourcedefinitions");
  EXPECT_THAT(Names(p), ElementsAre("Name", "Created At"));
  EXPECT_EQ(p.ColumnDefinitions()[1]["type"], "date");
  nlohmann::json crd = {
      {"metadata",
       {{"name", "widgets.example.com"}, {"creationTimestamp", "2025-06-01T10:20:30Z"}}}};
  EXPECT_EQ(Cells("apiextensions.k8s.io", "customresourcedefinitions", crd),
            nlohmann::json({"widgets.example.com", "2025-06-01T10:20:30Z"}));
}

TEST_F(PrinterTest, Event) {
  const std::vector<std::string> want = {"Last Seen",  "Type",    "Reason",  "Object",
                                         "Subobject*", "Source*", "Message", "First Seen*",
                                         "Count*",     "Name*"};
  EXPECT_EQ(Names(For("", "events")), want);
  EXPECT_EQ(Names(For("events.k8s.io", "events")), want);
  nlohmann::json ev = {
      {"metadata", Meta("web.17a")},
      {"involvedObject", {{"kind", "Deployment"}, {"name", "web"}, {"fieldPath", "spec"}}},
      {"type", "Normal"},
      {"reason", "ScalingReplicaSet"},
      {"message", "  Scaled up to 3\n"},
      {"source", {{"component", "deployment-controller"}}},
      {"firstTimestamp", Ago(absl::Minutes(10))},
      {"lastTimestamp", Ago(absl::Seconds(30))},
      {"count", 4}};
  EXPECT_EQ(Cells("", "events", ev),
            nlohmann::json({"30s", "Normal", "ScalingReplicaSet", "deployment/web", "spec",
                            "deployment-controller", "Scaled up to 3", "10m", 4, "web.17a"}));
}

TEST_F(PrinterTest, EventFromTheEventsApi) {
  // events.k8s.io/v1 style (stored in core form): eventTime instead of first/last timestamps,
  // no count, reporting controller/instance instead of source, series for repeats.
  nlohmann::json ev = {{"metadata", Meta("e1")},
                       {"involvedObject", {{"kind", "Widget"}}},
                       {"type", "Warning"},
                       {"reason", "Failed"},
                       {"message", "boom"},
                       {"eventTime", "2025-12-31T23:58:00.000000Z"},
                       {"reportingComponent", "ctrlhost/widgets"},
                       {"reportingInstance", "host-a"}};
  EXPECT_EQ(Cells("events.k8s.io", "events", ev),
            nlohmann::json({"2m", "Warning", "Failed", "widget", "", "ctrlhost/widgets, host-a",
                            "boom", "2m", 1, "e1"}));
  ev["series"] = {{"count", 7}, {"lastObservedTime", "2025-12-31T23:59:50.000000Z"}};
  nlohmann::json cells = Cells("events.k8s.io", "events", ev);
  EXPECT_EQ(cells[0], "10s");
  EXPECT_EQ(cells[8], 7);
  // Nothing set at all.
  EXPECT_EQ(Cells("", "events", nlohmann::json::object()),
            nlohmann::json({"<unknown>", "", "", "", "", "", "", "<unknown>", 1, ""}));
}

TEST_F(PrinterTest, MalformedObjectsNeverThrow) {
  const char* resources[][2] = {{"", "namespaces"},
                                {"", "configmaps"},
                                {"", "secrets"},
                                {"", "serviceaccounts"},
                                {"", "services"},
                                {"", "events"},
                                {"events.k8s.io", "events"},
                                {"apps", "deployments"},
                                {"coordination.k8s.io", "leases"},
                                {"apiextensions.k8s.io", "customresourcedefinitions"}};
  const char* objects[] = {
      "null",
      "[]",
      "7",
      R"("s")",
      "{}",
      R"({"metadata": 1, "spec": [], "status": "x", "data": 3, "type": 5, "secrets": {}})",
      R"({"metadata": {"name": 5, "creationTimestamp": 7},
          "spec": {"replicas": "3", "ports": [1, {"port": "80", "nodePort": -1}],
                   "clusterIPs": [1], "externalIPs": "x", "selector": {"a": 1},
                   "template": {"spec": {"containers": [1, {"name": 2}]}},
                   "holderIdentity": 3, "type": "LoadBalancer"},
          "status": {"readyReplicas": 1.5e300, "loadBalancer": {"ingress": [3, {"ip": 4}]}},
          "involvedObject": [], "series": {"count": "x"}, "source": "x", "count": -1e300})"};
  for (const auto& res : resources) {
    for (const char* text : objects) {
      const nlohmann::json obj = nlohmann::json::parse(text);
      TablePrinter p = For(res[0], res[1]);
      nlohmann::json cells;
      EXPECT_NO_THROW(cells = p.Cells(obj, obj, kNow)) << res[1] << " " << text;
      EXPECT_EQ(cells.size(), p.ColumnDefinitions().size()) << res[1] << " " << text;
    }
  }
}

TEST_F(PrinterTest, OtherKindsGetNameAndAge) {
  ResourceInfo r;
  r.group = "example.io";
  r.resource = "gadgets";
  TablePrinter p = TablePrinter::For(r);
  EXPECT_THAT(Names(p), ElementsAre("Name", "Age"));
  EXPECT_EQ(p.Cells({{"metadata", Meta("g")}}, {}, kNow), nlohmann::json({"g", "5m"}));
}

TEST(CustomColumnCellTest, TypedCells) {
  const nlohmann::json s = "x", i = 3, big = 1.9e300, f = 2.5, t = true, obj = {{"b", 1}, {"a", 2}},
                       arr = {1, "two"}, date = Ago(absl::Hours(3)), null = nullptr;
  EXPECT_EQ(CustomColumnCell("string", &s, kNow), "x");
  EXPECT_EQ(CustomColumnCell("string", &i, kNow), "3");
  EXPECT_EQ(CustomColumnCell("string", &f, kNow), "2.5");
  EXPECT_EQ(CustomColumnCell("string", &t, kNow), "true");
  EXPECT_EQ(CustomColumnCell("string", &obj, kNow), R"({"a":2,"b":1})");
  EXPECT_EQ(CustomColumnCell("string", &arr, kNow), R"([1,"two"])");
  EXPECT_EQ(CustomColumnCell("string", &null, kNow), nullptr);
  EXPECT_EQ(CustomColumnCell("string", nullptr, kNow), nullptr);
  EXPECT_EQ(CustomColumnCell("integer", &i, kNow), 3);
  EXPECT_EQ(CustomColumnCell("integer", &f, kNow), 2);  // truncated, as upstream
  EXPECT_EQ(CustomColumnCell("integer", &big, kNow), INT64_MAX);
  EXPECT_EQ(CustomColumnCell("integer", &s, kNow), nullptr);
  EXPECT_EQ(CustomColumnCell("number", &f, kNow), 2.5);
  EXPECT_EQ(CustomColumnCell("number", &i, kNow), 3.0);
  EXPECT_EQ(CustomColumnCell("number", &t, kNow), nullptr);
  EXPECT_EQ(CustomColumnCell("boolean", &t, kNow), true);
  EXPECT_EQ(CustomColumnCell("boolean", &s, kNow), nullptr);
  EXPECT_EQ(CustomColumnCell("date", &date, kNow), "3h");
  EXPECT_EQ(CustomColumnCell("date", &s, kNow), "<invalid>");
  const nlohmann::json empty = "";
  EXPECT_EQ(CustomColumnCell("date", &empty, kNow), "<unknown>");
  EXPECT_EQ(CustomColumnCell("date", &i, kNow), nullptr);
  EXPECT_EQ(CustomColumnCell("mystery", &s, kNow), nullptr);
}

TEST(CustomColumnCellTest, FloatsPrintLikeGo) {
  auto str = [](double d) {
    const nlohmann::json v = d;
    return CustomColumnCell("string", &v, kNow).get<std::string>();
  };
  EXPECT_EQ(str(0.1), "0.1");
  EXPECT_EQ(str(2.0), "2");
  EXPECT_EQ(str(1234567.5), "1234567.5");
  EXPECT_EQ(str(0.0001), "0.0001");
  EXPECT_EQ(str(0.00001), "1e-05");
  EXPECT_EQ(str(1e21), "1e+21");
  EXPECT_EQ(str(-3.25), "-3.25");
}

nlohmann::json WidgetColumns() {
  return nlohmann::json::parse(R"([
    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
    {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
    {"name": "Reason", "type": "string", "priority": 1, "description": "Why",
     "jsonPath": ".status.conditions[?(@.type=='Ready')].reason"},
    {"name": "Ports", "type": "string", "jsonPath": ".spec.ports[*].port"},
    {"name": "Last", "type": "integer", "jsonPath": ".spec.ports[-1].port"},
    {"name": "Label", "type": "string", "jsonPath": ".metadata.labels['app.kubernetes.io/name']"},
    {"name": "Paused", "type": "boolean", "jsonPath": ".spec.paused"},
    {"name": "Ratio", "type": "number", "format": "float", "jsonPath": ".spec.ratio"},
    {"name": "Broken", "type": "string", "jsonPath": ".spec[?(@.x=="},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
  ])");
}

TEST(CustomPrinterTest, ColumnsFromTheCrd) {
  TablePrinter p = TablePrinter::ForCustomResource(WidgetColumns());
  EXPECT_THAT(Names(p), ElementsAre("Name", "Size", "Ready", "Reason*", "Ports", "Last", "Label",
                                    "Paused", "Ratio", "Broken", "Age"));
  const nlohmann::json& defs = p.ColumnDefinitions();
  EXPECT_EQ(defs[0]["format"], "name");
  EXPECT_EQ(defs[1]["type"], "integer");
  EXPECT_EQ(defs[3]["description"], "Why");
  EXPECT_EQ(defs[8]["format"], "float");
  EXPECT_THAT(defs[1]["description"].get<std::string>(), ::testing::HasSubstr(".spec.size"));
  nlohmann::json w = nlohmann::json::parse(R"({
    "spec": {"size": 7, "paused": true, "ratio": 0.25,
             "ports": [{"port": 80}, {"port": 443}]},
    "status": {"conditions": [{"type": "Synced", "status": "True"},
                              {"type": "Ready", "status": "False", "reason": "Waiting"}]}})");
  w["metadata"] = Meta("w1", absl::Hours(51));
  w["metadata"]["labels"] = {{"app.kubernetes.io/name", "shop"}};
  // The first value a path finds (Ports), typed cells, null for a path that does not parse.
  EXPECT_EQ(p.Cells({}, w, kNow), nlohmann::json({"w1", 7, "False", "Waiting", "80", 443, "shop",
                                                  true, 0.25, nullptr, "2d3h"}));
  // Nothing there: null cells (kubectl prints <none>).
  EXPECT_EQ(p.Cells({}, {{"metadata", Meta("w2")}}, kNow),
            nlohmann::json({"w2", nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                            nullptr, nullptr, "5m"}));
}

TEST(CustomPrinterTest, NoColumnsMeansAge) {
  for (const nlohmann::json& cols : {nlohmann::json::array(), nlohmann::json(), nlohmann::json(3),
                                     nlohmann::json::parse(R"([1, "x"])")}) {
    TablePrinter p = TablePrinter::ForCustomResource(cols);
    EXPECT_THAT(Names(p), ElementsAre("Name", "Age")) << cols;
    EXPECT_EQ(p.ColumnDefinitions()[1]["type"], "date");
    EXPECT_EQ(p.Cells({}, {{"metadata", Meta("w")}}, kNow), nlohmann::json({"w", "5m"}));
  }
}

TEST(CustomPrinterTest, MalformedColumnDefinitions) {
  // Wrong types in the column definition itself: printed as empty, never thrown.
  TablePrinter p = TablePrinter::ForCustomResource(nlohmann::json::parse(
      R"([{"name": 1, "type": [], "jsonPath": 5, "priority": "high", "format": {}}])"));
  ASSERT_EQ(p.ColumnDefinitions().size(), 2u);
  EXPECT_EQ(p.ColumnDefinitions()[1]["name"], "");
  EXPECT_EQ(p.ColumnDefinitions()[1]["priority"], 0);
  EXPECT_EQ(p.Cells({}, {{"metadata", Meta("w")}}, kNow), nlohmann::json({"w", nullptr}));
}

// ---- Table responses through the handlers. ----

constexpr char kTableAccept[] =
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;"
    "g=meta.k8s.io,application/json";

class TableResponseTest : public ::testing::Test {
 protected:
  void SetUp() override { env_.CreateNamespace("ns1"); }

  nlohmann::json Table(const std::string& path,
                       const std::vector<std::pair<std::string, std::string>>& query = {}) {
    ApiResponse r = env_.Do("GET", path, "", "", query, kTableAccept);
    EXPECT_EQ(r.code, 200) << r.body;
    nlohmann::json t = ApiTestEnv::Json(r);
    EXPECT_EQ(t["kind"], "Table") << t;
    return t;
  }

  ApiTestEnv env_;
};

TEST_F(TableResponseTest, DeploymentColumns) {
  ApiResponse c = env_.Post("/apis/apps/v1/namespaces/ns1/deployments", std::string(R"({
      "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
      "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
               "template": {"metadata": {"labels": {"app": "web"}},
                            "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}})"));
  ASSERT_EQ(c.code, 201) << c.body;
  env_.clock().Advance(absl::Seconds(376));
  nlohmann::json t = Table("/apis/apps/v1/namespaces/ns1/deployments");
  ASSERT_EQ(t["columnDefinitions"].size(), 8u);
  EXPECT_EQ(t["columnDefinitions"][1]["name"], "Ready");
  ASSERT_EQ(t["rows"].size(), 1u);
  EXPECT_EQ(t["rows"][0]["cells"],
            nlohmann::json({"web", "0/2", 0, 0, "6m16s", "web", "nginx", "app=web"}));
  EXPECT_EQ(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
  // A single object is a one-row Table too.
  t = Table("/apis/apps/v1/namespaces/ns1/deployments/web");
  ASSERT_EQ(t["rows"].size(), 1u);
  EXPECT_EQ(t["rows"][0]["cells"][1], "0/2");
}

TEST_F(TableResponseTest, EventsInBothGroups) {
  ApiResponse c = env_.Post("/apis/events.k8s.io/v1/namespaces/ns1/events", std::string(R"({
      "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e1"},
      "eventTime": "2020-01-01T00:00:00.000000Z", "type": "Normal", "reason": "Created",
      "action": "Create", "note": "made it", "reportingController": "ctrlhost/test",
      "reportingInstance": "i1",
      "regarding": {"kind": "Widget", "name": "w", "namespace": "ns1"}})"));
  ASSERT_EQ(c.code, 201) << c.body;
  for (const char* path :
       {"/api/v1/namespaces/ns1/events", "/apis/events.k8s.io/v1/namespaces/ns1/events"}) {
    nlohmann::json t = Table(path);
    ASSERT_EQ(t["rows"].size(), 1u) << path;
    const nlohmann::json& cells = t["rows"][0]["cells"];
    EXPECT_EQ(cells[2], "Created") << path;
    EXPECT_EQ(cells[3], "widget/w") << path;
    EXPECT_EQ(cells[5], "ctrlhost/test, i1") << path;
    EXPECT_EQ(cells[6], "made it") << path;
    EXPECT_EQ(cells[9], "e1") << path;
  }
}

TEST_F(TableResponseTest, IncludeObject) {
  env_.CreateConfigMap("ns1", "a", {{"x", "y"}}, {{"k", "v"}});
  const std::vector<ObjectPtr> items = {
      env_.store().Get(env_.registry().Find("", "v1", "configmaps")->Key("ns1", "a"))};
  ASSERT_NE(items[0], nullptr);
  const ResourceInfo& r = *env_.registry().Find("", "v1", "configmaps");
  const absl::Time now = env_.clock().Now();

  nlohmann::json t = TableOf(r, items, 5, "", now);
  EXPECT_EQ(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
  EXPECT_EQ(t["rows"][0]["object"]["apiVersion"], "meta.k8s.io/v1");
  EXPECT_EQ(t["rows"][0]["object"]["metadata"]["labels"]["x"], "y");
  EXPECT_FALSE(t["rows"][0]["object"].contains("data"));

  auto options = [](const char* value) {
    ApiRequest req;
    req.query["includeObject"] = value;
    return TableOptionsOf(req);
  };
  ASSERT_TRUE(options("None").ok());
  t = TableOf(r, items, 5, "", now, *options("None"));
  ASSERT_TRUE(t["rows"][0].contains("object"));
  EXPECT_TRUE(t["rows"][0]["object"].is_null());
  t = TableOf(r, items, 5, "", now, *options("Object"));
  EXPECT_EQ(t["rows"][0]["object"]["kind"], "ConfigMap");
  EXPECT_EQ(t["rows"][0]["object"]["data"]["k"], "v");
  EXPECT_EQ(options("Metadata")->include_object, TableOptions::IncludeObject::kMetadata);
  EXPECT_EQ(options("")->include_object, TableOptions::IncludeObject::kMetadata);
  EXPECT_EQ(TableOptionsOf(ApiRequest())->include_object, TableOptions::IncludeObject::kMetadata);
  absl::StatusOr<TableOptions> bad = options("Everything");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("Everything"));

  // List metadata carries the revision and continue token; unparsable items are skipped.
  auto junk = std::make_shared<StoredObject>(*items[0]);
  junk->value = "{not json";
  t = TableOf(r, {items[0], junk}, 9, "tok", now);
  EXPECT_EQ(t["metadata"]["resourceVersion"], "9");
  EXPECT_EQ(t["metadata"]["continue"], "tok");
  EXPECT_EQ(t["rows"].size(), 1u);
}

// TableFormat's pieces, joined as ListBody streams them, are TableOf's text.
TEST_F(TableResponseTest, PiecesJoinToTableOf) {
  // Items that are not JSON objects are left out: first, in the middle and last.
  const ResourceInfo& r = *env_.registry().Find("", "v1", "configmaps");
  std::vector<ObjectPtr> items;
  for (int i = 0; i < 5; ++i) {
    const std::string name = absl::StrCat("cm-", i);
    env_.CreateConfigMap("ns1", name, {{"i", name}}, {{"k", "v"}});
    items.push_back(env_.store().Get(r.Key("ns1", name)));
    ASSERT_NE(items.back(), nullptr);
  }
  env_.clock().Advance(absl::Minutes(3));
  auto junk = [&](const char* value) {
    auto o = std::make_shared<StoredObject>(*items[0]);
    o->value = value;
    return o;
  };
  items.insert(items.begin(), junk("{not json"));
  items.insert(items.begin() + 3, junk("[1]"));
  items.push_back(junk("7"));
  for (auto include : {TableOptions::IncludeObject::kNone, TableOptions::IncludeObject::kMetadata,
                       TableOptions::IncludeObject::kObject}) {
    for (const std::string token : {"", "dG9rZW4"}) {
      TableOptions options;
      options.include_object = include;
      const TableFormat format(r, env_.clock().Now(), options);
      std::string text = format.HeadBytes(42, token);
      bool first = true;
      for (const ObjectPtr& o : items) {
        std::optional<std::string> row = format.RowBytes(*o);
        if (!row.has_value()) continue;
        if (!first) text.push_back(',');
        first = false;
        text.append(*row);
      }
      absl::StrAppend(&text, TableFormat::kTail);
      const std::string want = Dump(TableOf(r, items, 42, token, env_.clock().Now(), options));
      EXPECT_EQ(text, want) << "includeObject " << static_cast<int>(include) << ", token " << token;
      EXPECT_EQ(nlohmann::json::parse(want)["rows"].size(), 5u);
    }
  }
}

TEST(WantsTableTest, AcceptNegotiation) {
  EXPECT_TRUE(WantsTable(kTableAccept));
  EXPECT_TRUE(WantsTable("application/json;as=Table;v=v1;g=meta.k8s.io"));
  EXPECT_TRUE(WantsTable("application/json; as=Table; g=meta.k8s.io; v=v1beta1"));
  EXPECT_TRUE(WantsTable("application/json;as=Table"));
  // A transformation we do not serve is skipped for the next range.
  EXPECT_TRUE(
      WantsTable("application/json;as=Table;v=v2;g=meta.k8s.io,"
                 "application/json;as=Table;v=v1;g=meta.k8s.io"));
  EXPECT_FALSE(WantsTable("application/json;as=Table;v=v1;g=other.io"));
  EXPECT_FALSE(WantsTable("application/json"));
  EXPECT_FALSE(WantsTable(""));
  EXPECT_FALSE(WantsTable("application/json,application/json;as=Table;v=v1;g=meta.k8s.io"));
  EXPECT_FALSE(WantsTable("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"));
  EXPECT_FALSE(WantsTable(";;;,,=,as=,;as"));
}

}  // namespace
}  // namespace ctrlhost::apiserver
