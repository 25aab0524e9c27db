#include "runtime/apiserver/printers.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ctrlhost::apiserver {
namespace {

const nlohmann::json& Null() {
  static const nlohmann::json* const kNull = new nlohmann::json(nullptr);
  return *kNull;
}

// The value at `path` (object keys), or null when a step is missing or not an object.
const nlohmann::json& At(const nlohmann::json& j, std::initializer_list<const char*> path) {
  const nlohmann::json* cur = &j;
  for (const char* key : path) {
    if (!cur->is_object()) return Null();
    auto it = cur->find(key);
    if (it == cur->end()) return Null();
    cur = &*it;
  }
  return *cur;
}

std::string Str(const nlohmann::json& j, std::initializer_list<const char*> path) {
  const nlohmann::json& v = At(j, path);
  return v.is_string() ? v.get<std::string>() : "";
}

// A JSON number as int64 (floating point truncated and clamped).
std::optional<int64_t> ToInt(const nlohmann::json& v) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    return u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
               ? std::numeric_limits<int64_t>::max()
               : static_cast<int64_t>(u);
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isnan(d)) return std::nullopt;
    if (d >= 9.2e18) return std::numeric_limits<int64_t>::max();
    if (d <= -9.2e18) return std::numeric_limits<int64_t>::min();
    return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

int64_t Int(const nlohmann::json& j, std::initializer_list<const char*> path, int64_t absent = 0) {
  return ToInt(At(j, path)).value_or(absent);
}

size_t Size(const nlohmann::json& v) { return v.is_object() || v.is_array() ? v.size() : 0; }

nlohmann::json Column(const char* name, const char* type, const char* description, int priority = 0,
                      const char* format = "") {
  return {{"name", name},
          {"type", type},
          {"format", format},
          {"description", description},
          {"priority", priority}};
}

constexpr char kNameDoc[] = "Name must be unique within a namespace.";
constexpr char kAgeDoc[] =
    "CreationTimestamp is a timestamp representing the server time when this object was "
    "created, shown as the time since.";

nlohmann::json NameColumn(int priority = 0) {
  return Column("Name", "string", kNameDoc, priority, "name");
}
nlohmann::json AgeColumn() { return Column("Age", "string", kAgeDoc); }

std::string Age(const nlohmann::json& obj, absl::Time now) {
  return TimestampAge(At(obj, {"metadata", "creationTimestamp"}), now);
}
std::string Name(const nlohmann::json& obj) { return Str(obj, {"metadata", "name"}); }

// Go's strconv.FormatFloat(f, 'g', -1, 64), which fmt's %v uses: the shortest digits that
// read back as `d`, in exponent form below 1e-4 and from 1e21 on.
std::string FormatFloat(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "+Inf" : "-Inf";
  char buf[64];
  int digits = 1;
  for (; digits < 17; ++digits) {
    std::snprintf(buf, sizeof(buf), "%.*e", digits - 1, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::snprintf(buf, sizeof(buf), "%.*e", digits - 1, d);
  const int exp = d == 0 ? 0 : std::atoi(std::strchr(buf, 'e') + 1);
  if (exp < -4 || exp >= 21) return buf;
  std::snprintf(buf, sizeof(buf), "%.*f", std::max(digits - 1 - exp, 0), d);
  return buf;
}

// ---- Built-in kinds (kube-apiserver's printers; cells computed on the stored form). ----

nlohmann::json NamespaceCells(const nlohmann::json& o, absl::Time now) {
  return {Name(o), Str(o, {"status", "phase"}), Age(o, now)};
}

nlohmann::json ConfigMapCells(const nlohmann::json& o, absl::Time now) {
  return {Name(o), Size(At(o, {"data"})) + Size(At(o, {"binaryData"})), Age(o, now)};
}

nlohmann::json SecretCells(const nlohmann::json& o, absl::Time now) {
  std::string type = Str(o, {"type"});
  if (type.empty()) type = "Opaque";  // what Kubernetes defaults it to
  return {Name(o), type, Size(At(o, {"data"})), Age(o, now)};
}

nlohmann::json ServiceAccountCells(const nlohmann::json& o, absl::Time now) {
  return {Name(o), Size(At(o, {"secrets"})), Age(o, now)};
}

// Load balancer ingress IPs (else hostnames), sorted and unique, comma-separated.
std::string LoadBalancerAddresses(const nlohmann::json& svc) {
  std::vector<std::string> out;
  const nlohmann::json& ingress = At(svc, {"status", "loadBalancer", "ingress"});
  if (ingress.is_array()) {
    for (const auto& i : ingress) {
      std::string a = Str(i, {"ip"});
      if (a.empty()) a = Str(i, {"hostname"});
      if (!a.empty()) out.push_back(std::move(a));
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return absl::StrJoin(out, ",");
}

std::vector<std::string> Strings(const nlohmann::json& v) {
  std::vector<std::string> out;
  if (!v.is_array()) return out;
  for (const auto& s : v) {
    if (s.is_string()) out.push_back(s.get<std::string>());
  }
  return out;
}

std::string ServiceExternalIp(const nlohmann::json& svc, const std::string& type) {
  const std::vector<std::string> external = Strings(At(svc, {"spec", "externalIPs"}));
  if (type == "ClusterIP" || type == "NodePort") {
    return external.empty() ? "<none>" : absl::StrJoin(external, ",");
  }
  if (type == "LoadBalancer") {
    const std::string lb = LoadBalancerAddresses(svc);
    if (!external.empty()) {
      return lb.empty() ? absl::StrJoin(external, ",")
                        : absl::StrCat(lb, ",", absl::StrJoin(external, ","));
    }
    return lb.empty() ? "<pending>" : lb;
  }
  if (type == "ExternalName") return Str(svc, {"spec", "externalName"});
  return "<unknown>";
}

std::string ServicePorts(const nlohmann::json& svc) {
  std::vector<std::string> pieces;
  const nlohmann::json& ports = At(svc, {"spec", "ports"});
  if (ports.is_array()) {
    for (const auto& p : ports) {
      std::string protocol = Str(p, {"protocol"});
      if (protocol.empty()) protocol = "TCP";
      const int64_t node_port = Int(p, {"nodePort"});
      pieces.push_back(node_port > 0 ? absl::StrCat(Int(p, {"port"}), ":", node_port, "/", protocol)
                                     : absl::StrCat(Int(p, {"port"}), "/", protocol));
    }
  }
  return pieces.empty() ? "<none>" : absl::StrJoin(pieces, ",");
}

nlohmann::json ServiceCells(const nlohmann::json& o, absl::Time now) {
  std::string type = Str(o, {"spec", "type"});
  if (type.empty()) type = "ClusterIP";  // what Kubernetes defaults it to
  std::string cluster_ip = "<none>";
  const std::vector<std::string> ips = Strings(At(o, {"spec", "clusterIPs"}));
  if (!ips.empty()) {
    cluster_ip = ips[0];
  } else if (!Str(o, {"spec", "clusterIP"}).empty()) {
    cluster_ip = Str(o, {"spec", "clusterIP"});
  }
  return {Name(o),
          type,
          cluster_ip,
          ServiceExternalIp(o, type),
          ServicePorts(o),
          Age(o, now),
          FormatLabels(At(o, {"spec", "selector"}))};
}

std::string FirstNonEmpty(const std::string& a, const std::string& b) { return a.empty() ? b : a; }

// Core/v1 Event (also how events.k8s.io/v1 Events are stored).
nlohmann::json EventCells(const nlohmann::json& o, absl::Time now) {
  auto is_set = [](const nlohmann::json& v) {
    return v.is_string() && !v.get_ref<const std::string&>().empty();
  };
  const nlohmann::json& first_ts = At(o, {"firstTimestamp"});
  std::string first =
      is_set(first_ts) ? TimestampAge(first_ts, now) : TimestampAge(At(o, {"eventTime"}), now);
  const nlohmann::json& last_ts = At(o, {"lastTimestamp"});
  std::string last = is_set(last_ts) ? TimestampAge(last_ts, now) : first;
  int64_t count = Int(o, {"count"});
  const nlohmann::json& series = At(o, {"series"});
  if (series.is_object()) {
    last = TimestampAge(At(series, {"lastObservedTime"}), now);
    count = Int(series, {"count"});
  } else if (count == 0) {
    count = 1;  // singleton events of the events.k8s.io API carry no count
  }
  const std::string kind = absl::AsciiStrToLower(Str(o, {"involvedObject", "kind"}));
  const std::string name = Str(o, {"involvedObject", "name"});
  const std::string target = name.empty() ? kind : absl::StrCat(kind, "/", name);
  const std::string component =
      FirstNonEmpty(Str(o, {"source", "component"}), Str(o, {"reportingComponent"}));
  const std::string instance =
      FirstNonEmpty(Str(o, {"source", "host"}), Str(o, {"reportingInstance"}));
  const std::string source = instance.empty() ? component : absl::StrCat(component, ", ", instance);
  return {last,
          Str(o, {"type"}),
          Str(o, {"reason"}),
          target,
          Str(o, {"involvedObject", "fieldPath"}),
          source,
          std::string(absl::StripAsciiWhitespace(Str(o, {"message"}))),
          first,
          count,
          Name(o)};
}

nlohmann::json DeploymentCells(const nlohmann::json& o, absl::Time now) {
  std::vector<std::string> names, images;
  const nlohmann::json& containers = At(o, {"spec", "template", "spec", "containers"});
  if (containers.is_array()) {
    for (const auto& c : containers) {
      names.push_back(Str(c, {"name"}));
      images.push_back(Str(c, {"image"}));
    }
  }
  return {Name(o),
          absl::StrCat(Int(o, {"status", "readyReplicas"}), "/", Int(o, {"spec", "replicas"}, 1)),
          Int(o, {"status", "updatedReplicas"}),
          Int(o, {"status", "availableReplicas"}),
          Age(o, now),
          absl::StrJoin(names, ","),
          absl::StrJoin(images, ","),
          FormatLabelSelector(At(o, {"spec", "selector"}))};
}

nlohmann::json LeaseCells(const nlohmann::json& o, absl::Time now) {
  return {Name(o), Str(o, {"spec", "holderIdentity"}), Age(o, now)};
}

// kube's default table convertor (CRDs use it): the creation time itself, not an age.
nlohmann::json CrdCells(const nlohmann::json& o, absl::Time) {
  std::optional<absl::Time> t = ParseTimestamp(Str(o, {"metadata", "creationTimestamp"}));
  std::string created = "0001-01-01T00:00:00Z";
  if (t && *t != absl::InfinitePast()) {
    created = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", *t, absl::UTCTimeZone());
  }
  return {Name(o), created};
}

nlohmann::json GenericCells(const nlohmann::json& o, absl::Time now) {
  return {Name(o), Age(o, now)};
}

using StoredCells = nlohmann::json (*)(const nlohmann::json& stored, absl::Time now);

struct Builtin {
  nlohmann::json columns;
  StoredCells cells;
};

const std::map<std::string, Builtin>& Builtins() {
  static const auto* const kBuiltins = [] {
    auto* m = new std::map<std::string, Builtin>;
    (*m)["/namespaces"] = {
        {NameColumn(), Column("Status", "string", "The status of the namespace"), AgeColumn()},
        NamespaceCells};
    (*m)["/configmaps"] = {
        {NameColumn(), Column("Data", "string", "Number of data and binaryData entries."),
         AgeColumn()},
        ConfigMapCells};
    (*m)["/secrets"] = {
        {NameColumn(),
         Column("Type", "string", "Used to facilitate programmatic handling of secret data."),
         Column("Data", "string", "Number of data entries."), AgeColumn()},
        SecretCells};
    (*m)["/serviceaccounts"] = {
        {NameColumn(), Column("Secrets", "string", "Number of secrets the service account lists."),
         AgeColumn()},
        ServiceAccountCells};
    (*m)["/services"] = {
        {NameColumn(), Column("Type", "string", "How the service is exposed."),
         Column("Cluster-IP", "string", "The IP address of the service inside the cluster."),
         Column("External-IP", "string", "External IPs and load balancer ingress points."),
         Column("Port(s)", "string", "The ports the service exposes."), AgeColumn(),
         Column("Selector", "string", "Route traffic to pods with these labels.", 1)},
        ServiceCells};
    nlohmann::json event_columns = {
        Column("Last Seen", "string", "Time since the event was last observed."),
        Column("Type", "string", "Type of the event (Normal, Warning)."),
        Column("Reason", "string", "Why the action was taken, machine readable."),
        Column("Object", "string", "The object the event is about."),
        Column("Subobject", "string", "Field path within the object.", 1),
        Column("Source", "string", "The component reporting the event.", 1),
        Column("Message", "string", "Human-readable description of the event."),
        Column("First Seen", "string", "Time since the event was first observed.", 1),
        Column("Count", "string", "Number of times the event occurred.", 1),
        NameColumn(1)};
    (*m)["/events"] = {event_columns, EventCells};
    (*m)["events.k8s.io/events"] = {event_columns, EventCells};
    (*m)["apps/deployments"] = {
        {NameColumn(), Column("Ready", "string", "Number of the pod with ready state"),
         Column("Up-to-date", "string", "Replicas updated to the latest template."),
         Column("Available", "string", "Replicas available to serve traffic."), AgeColumn(),
         Column("Containers", "string", "Names of each container in the template.", 1),
         Column("Images", "string", "Images referenced by each container in the template.", 1),
         Column("Selector", "string", "Label selector of the pods the deployment manages.", 1)},
        DeploymentCells};
    (*m)["coordination.k8s.io/leases"] = {
        {NameColumn(), Column("Holder", "string", "Identity of the holder of the lease."),
         AgeColumn()},
        LeaseCells};
    (*m)["apiextensions.k8s.io/customresourcedefinitions"] = {
        {NameColumn(), Column("Created At", "date", "Time the object was created.")}, CrdCells};
    return m;
  }();
  return *kBuiltins;
}

}  // namespace

std::string HumanDuration(absl::Duration d) {
  const int64_t seconds = absl::ToInt64Seconds(d);  // truncated toward zero, as Go's int()
  if (seconds < -1) return "<invalid>";
  if (seconds < 0) return "0s";
  if (seconds < 60 * 2) return absl::StrCat(seconds, "s");
  const int64_t minutes = absl::ToInt64Minutes(d);
  if (minutes < 10) {
    const int64_t s = seconds % 60;
    return s == 0 ? absl::StrCat(minutes, "m") : absl::StrCat(minutes, "m", s, "s");
  }
  if (minutes < 60 * 3) return absl::StrCat(minutes, "m");
  const int64_t hours = absl::ToInt64Hours(d);
  if (hours < 8) {
    const int64_t m = minutes % 60;
    return m == 0 ? absl::StrCat(hours, "h") : absl::StrCat(hours, "h", m, "m");
  }
  if (hours < 48) return absl::StrCat(hours, "h");
  if (hours < 24 * 8) {
    const int64_t h = hours % 24;
    return h == 0 ? absl::StrCat(hours / 24, "d") : absl::StrCat(hours / 24, "d", h, "h");
  }
  if (hours < 24 * 365 * 2) return absl::StrCat(hours / 24, "d");
  if (hours < 24 * 365 * 8) {
    const int64_t dy = (hours / 24) % 365;
    return dy == 0 ? absl::StrCat(hours / 24 / 365, "y")
                   : absl::StrCat(hours / 24 / 365, "y", dy, "d");
  }
  return absl::StrCat(hours / 24 / 365, "y");
}

std::optional<absl::Time> ParseTimestamp(absl::string_view ts) {
  absl::Time t;
  std::string err;
  if (!absl::ParseTime(absl::RFC3339_full, ts, &t, &err)) return std::nullopt;
  static const absl::Time kGoZero =
      absl::FromCivil(absl::CivilSecond(1, 1, 1, 0, 0, 0), absl::UTCTimeZone());
  if (t == kGoZero) return absl::InfinitePast();
  return t;
}

std::string TimestampAge(const nlohmann::json& value, absl::Time now) {
  if (value.is_null()) return "<unknown>";
  if (!value.is_string()) return "<invalid>";
  const std::string& s = value.get_ref<const std::string&>();
  if (s.empty()) return "<unknown>";
  std::optional<absl::Time> t = ParseTimestamp(s);
  if (!t) return "<invalid>";
  if (*t == absl::InfinitePast()) return "<unknown>";
  return HumanDuration(now - *t);
}

std::string FormatLabels(const nlohmann::json& labels) {
  if (!labels.is_object() || labels.empty()) return "<none>";
  std::vector<std::string> parts;  // nlohmann objects iterate in key order
  for (auto it = labels.begin(); it != labels.end(); ++it) {
    parts.push_back(
        absl::StrCat(it.key(), "=", it->is_string() ? it->get<std::string>() : it->dump()));
  }
  return absl::StrJoin(parts, ",");
}

std::string FormatLabelSelector(const nlohmann::json& selector) {
  if (selector.is_null()) return "";
  if (!selector.is_object()) return "<invalid>";
  std::vector<std::pair<std::string, std::string>> reqs;  // key, rendered requirement
  const nlohmann::json& match_labels = At(selector, {"matchLabels"});
  if (match_labels.is_object()) {
    for (auto it = match_labels.begin(); it != match_labels.end(); ++it) {
      if (!it->is_string()) return "<invalid>";
      reqs.emplace_back(it.key(), absl::StrCat(it.key(), "=", it->get<std::string>()));
    }
  } else if (!match_labels.is_null()) {
    return "<invalid>";
  }
  const nlohmann::json& exprs = At(selector, {"matchExpressions"});
  if (exprs.is_array()) {
    for (const auto& e : exprs) {
      const std::string key = Str(e, {"key"});
      const std::string op = Str(e, {"operator"});
      std::vector<std::string> values = Strings(At(e, {"values"}));
      if (key.empty() || Size(At(e, {"values"})) != values.size()) return "<invalid>";
      std::sort(values.begin(), values.end());
      if (op == "In" || op == "NotIn") {
        if (values.empty()) return "<invalid>";
        reqs.emplace_back(key, absl::StrCat(key, op == "In" ? " in (" : " notin (",
                                            absl::StrJoin(values, ","), ")"));
      } else if (op == "Exists" || op == "DoesNotExist") {
        if (!values.empty()) return "<invalid>";
        reqs.emplace_back(key, op == "Exists" ? key : absl::StrCat("!", key));
      } else {
        return "<invalid>";
      }
    }
  } else if (!exprs.is_null()) {
    return "<invalid>";
  }
  std::stable_sort(reqs.begin(), reqs.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> parts;
  for (auto& r : reqs) parts.push_back(std::move(r.second));
  return absl::StrJoin(parts, ",");
}

nlohmann::json CustomColumnCell(absl::string_view type, const nlohmann::json* value,
                                absl::Time now) {
  if (value == nullptr || value->is_null()) return nullptr;
  const nlohmann::json& v = *value;
  if (type == "string") {
    if (v.is_string()) return v;
    if (v.is_object() || v.is_array())
      return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
    if (v.is_number_float()) return FormatFloat(v.get<double>());
    if (v.is_number()) return v.dump();
    return nullptr;
  }
  if (type == "integer") {
    if (!v.is_number()) return nullptr;
    return *ToInt(v);
  }
  if (type == "number") {
    if (!v.is_number()) return nullptr;
    return v.get<double>();
  }
  if (type == "boolean") return v.is_boolean() ? v : nlohmann::json();
  if (type == "date") {
    if (!v.is_string()) return nullptr;
    return TimestampAge(v, now);
  }
  return nullptr;
}

TablePrinter TablePrinter::ForCustomResource(const nlohmann::json& printer_columns) {
  struct Col {
    std::string type;
    std::optional<JsonPath> path;  // nullopt when the jsonPath does not parse
  };
  nlohmann::json defs = nlohmann::json::array({NameColumn()});
  std::vector<Col> cols;
  auto add = [&](const nlohmann::json& c) {
    auto text = [&c](const char* key) { return Str(c, {key}); };
    const std::string json_path = text("jsonPath");
    std::string description = text("description");
    if (description.empty()) description = absl::StrCat("Custom resource column: ", json_path);
    defs.push_back({{"name", text("name")},
                    {"type", text("type")},
                    {"format", text("format")},
                    {"description", description},
                    {"priority", Int(c, {"priority"})}});
    Col col{text("type"), std::nullopt};
    if (auto p = JsonPath::Parse(json_path); p.ok()) col.path = *std::move(p);
    cols.push_back(std::move(col));
  };
  bool any = false;
  if (printer_columns.is_array()) {
    for (const auto& c : printer_columns) {
      if (!c.is_object()) continue;
      add(c);
      any = true;
    }
  }
  if (!any) {  // kube serves an Age column when a CRD declares none
    add({{"name", "Age"},
         {"type", "date"},
         {"jsonPath", ".metadata.creationTimestamp"},
         {"description", kAgeDoc}});
  }
  auto shared = std::make_shared<const std::vector<Col>>(std::move(cols));
  return TablePrinter(std::move(defs), [shared](const nlohmann::json&, const nlohmann::json& served,
                                                absl::Time now) {
    nlohmann::json cells = nlohmann::json::array({Name(served)});
    for (const Col& c : *shared) {
      cells.push_back(c.path ? CustomColumnCell(c.type, c.path->FindFirst(served), now)
                             : nlohmann::json());
    }
    return cells;
  });
}

TablePrinter TablePrinter::For(const ResourceInfo& r) {
  if (r.custom) return ForCustomResource(r.printer_columns);
  auto it = Builtins().find(absl::StrCat(r.group, "/", r.resource));
  if (it == Builtins().end()) {
    return TablePrinter(nlohmann::json::array({NameColumn(), AgeColumn()}),
                        [](const nlohmann::json& stored, const nlohmann::json&, absl::Time now) {
                          return GenericCells(stored, now);
                        });
  }
  StoredCells cells = it->second.cells;
  return TablePrinter(it->second.columns,
                      [cells](const nlohmann::json& stored, const nlohmann::json&, absl::Time now) {
                        return cells(stored, now);
                      });
}

}  // namespace ctrlhost::apiserver
