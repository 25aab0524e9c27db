#include "runtime/apiserver/object_util.h"

#include <algorithm>
#include <set>
#include <string_view>

#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "runtime/apiserver/body_limits.h"
#include "runtime/apiserver/kubeproto/kubeproto.h"
#include "runtime/common/status_macros.h"
#include "runtime/common/yaml_json.h"
#include "runtime/kube/api_status.h"
#include "simdjson.h"

namespace ctrlhost::apiserver {
namespace {

absl::BitGen& Gen() {
  thread_local absl::BitGen gen;
  return gen;
}

}  // namespace

std::string NewUid() {
  uint8_t b[16];
  for (auto& x : b) x = absl::Uniform<uint8_t>(Gen());
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  return absl::StrFormat("%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                         b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
                         b[12], b[13], b[14], b[15]);
}

std::string RandomNameSuffix() {
  static constexpr char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  std::string s(5, ' ');
  for (char& c : s) c = kAlphabet[absl::Uniform<size_t>(Gen(), 0, sizeof(kAlphabet) - 1)];
  return s;
}

std::string FormatTimestamp(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

absl::StatusOr<nlohmann::json> ParseJsonBody(absl::string_view body) {
  // Before parsing: everything after the parser recurses once per level (body_limits.h).
  RETURN_IF_ERROR(CheckJsonTextNesting(body, "the request body"));
  nlohmann::json j = nlohmann::json::parse(body.begin(), body.end(), nullptr,
                                           /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    // Parse again with exceptions for the position of the error.
    try {
      nlohmann::json ignored = nlohmann::json::parse(body.begin(), body.end());
    } catch (const nlohmann::json::parse_error& e) {
      return kube::BadRequestError(
          absl::StrCat("the request body is not valid JSON: at byte ", e.byte, ": ",
                       absl::StripPrefix(e.what(), "[json.exception.parse_error.101] ")));
    } catch (const nlohmann::json::exception& e) {
      // out_of_range 406: a number such as 1e400 that no float64 holds (kube: 400 too).
      return kube::BadRequestError(absl::StrCat("the request body is not valid JSON: ",
                                                absl::StripPrefix(e.what(), "[json.exception.")));
    }
    return kube::BadRequestError("the request body is not valid JSON");
  }
  return j;
}

absl::StatusOr<nlohmann::json> ParseObjectBody(absl::string_view content_type,
                                               absl::string_view body) {
  absl::string_view ct = content_type.substr(0, content_type.find(';'));
  ct = absl::StripAsciiWhitespace(ct);
  if (ct.empty() || ct == "application/json" || ct == "*/*") return ParseJsonBody(body);
  if (ct == "application/yaml" || ct == "application/x-yaml" || ct == "text/yaml") {
    // yaml-cpp would silently turn invalid UTF-8 into U+FFFD (kube-apiserver: 400).
    if (!IsValidUtf8(body)) {
      return kube::BadRequestError("the YAML request body is not valid UTF-8");
    }
    auto j = common::YamlToJson(body);
    if (!j.ok()) return kube::BadRequestError(j.status().message());
    return j;
  }
  if (ct == kProtobufContentType) return DecodeKubeProtobuf(body);
  return kube::UnsupportedMediaTypeError(
      absl::StrCat("the body of the request was in an unknown format - accepted media types "
                   "include: application/json, application/yaml, "
                   "application/vnd.kubernetes.protobuf; got ",
                   content_type));
}

namespace {

// A SAX consumer of a JSON text that records the paths of object members given twice.
class DuplicateFieldFinder : public nlohmann::json_sax<nlohmann::json> {
 public:
  std::vector<std::string> found;

  bool null() override { return Value(); }
  bool boolean(bool) override { return Value(); }
  bool number_integer(number_integer_t) override { return Value(); }
  bool number_unsigned(number_unsigned_t) override { return Value(); }
  bool number_float(number_float_t, const string_t&) override { return Value(); }
  bool string(string_t&) override { return Value(); }
  bool binary(binary_t&) override { return Value(); }
  bool start_object(std::size_t) override {
    Frame f;
    f.path = ChildPath();
    f.object = true;
    stack_.push_back(std::move(f));
    return true;
  }
  bool key(string_t& key) override {
    Frame& f = stack_.back();
    f.key = key;
    if (!f.keys.insert(key).second && found.size() < 20) {
      found.push_back(f.path.empty() ? key : absl::StrCat(f.path, ".", key));
    }
    return true;
  }
  bool end_object() override { return Pop(); }
  bool start_array(std::size_t) override {
    Frame f;
    f.path = ChildPath();
    stack_.push_back(std::move(f));
    return true;
  }
  bool end_array() override { return Pop(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  struct Frame {
    std::string path;
    bool object = false;
    std::string key;
    size_t index = 0;
    std::set<std::string> keys;
  };
  std::string ChildPath() {
    if (stack_.empty()) return "";
    Frame& f = stack_.back();
    if (f.object) return f.path.empty() ? f.key : absl::StrCat(f.path, ".", f.key);
    return absl::StrCat(f.path, "[", f.index++, "]");
  }
  bool Value() {
    if (!stack_.empty() && !stack_.back().object) ++stack_.back().index;
    return true;
  }
  bool Pop() {
    stack_.pop_back();
    if (!stack_.empty() && !stack_.back().object) ++stack_.back().index;
    return true;
  }
  std::vector<Frame> stack_;
};

}  // namespace

std::vector<std::string> DuplicateJsonFields(absl::string_view body) {
  if (JsonTextNestingDepth(body) > kMaxNestingDepth) return {};
  DuplicateFieldFinder finder;
  try {
    nlohmann::json::sax_parse(body.begin(), body.end(), &finder);
  } catch (const nlohmann::json::exception&) {
    return {};
  }
  return finder.found;
}

std::map<std::string, std::string> LabelsOf(const nlohmann::json& object) {
  std::map<std::string, std::string> out;
  auto m = object.find("metadata");
  if (m == object.end() || !m->is_object()) return out;
  auto l = m->find("labels");
  if (l == m->end() || !l->is_object()) return out;
  for (auto it = l->begin(); it != l->end(); ++it) {
    if (it.value().is_string()) out[it.key()] = it.value().get<std::string>();
  }
  return out;
}

namespace {

// simdjson's DOM parser (runtime-dispatched to the CPU's SIMD kernels, unlike On Demand, which
// is compiled for the build's baseline) builds a flat tape without an allocation per node.
// It needs SIMDJSON_PADDING readable bytes after the document: a per-thread copy with room
// for them (objects are a few KiB; the buffer and the parser are reused).
// False when `json` is not valid JSON or not an object; `has_meta` says whether it has a
// metadata object.
bool ParseMetadata(absl::string_view json, simdjson::dom::object* meta, bool* has_meta) {
  thread_local std::string buffer;
  thread_local simdjson::dom::parser parser;
  buffer.reserve(json.size() + simdjson::SIMDJSON_PADDING);
  buffer.assign(json.data(), json.size());
  simdjson::dom::element doc;
  if (parser.parse(buffer.data(), buffer.size(), /*realloc_if_needed=*/false).get(doc) !=
      simdjson::SUCCESS) {
    return false;
  }
  simdjson::dom::object root;
  if (doc.get_object().get(root) != simdjson::SUCCESS) return false;
  simdjson::dom::element m;
  *has_meta = root["metadata"].get(m) == simdjson::SUCCESS && m.get_object().get(*meta) == 0;
  return true;
}

// Fills `labels`; false when the document is not a valid JSON object (the caller then parses
// it with nlohmann to give the same answer as before).
bool FastLabels(absl::string_view json, std::map<std::string, std::string>* labels) {
  simdjson::dom::object meta;
  bool has_meta = false;
  if (!ParseMetadata(json, &meta, &has_meta)) return false;
  if (!has_meta) return true;
  simdjson::dom::element l;
  simdjson::dom::object object;
  if (meta["labels"].get(l) != simdjson::SUCCESS || l.get_object().get(object) != 0) return true;
  for (simdjson::dom::key_value_pair kv : object) {
    std::string_view v;
    if (kv.value.get_string().get(v) == simdjson::SUCCESS) {
      (*labels)[std::string(kv.key)] = std::string(v);
    }
  }
  return true;
}

bool FastOwnership(absl::string_view json, OwnershipFields* out) {
  simdjson::dom::object meta;
  bool has_meta = false;
  if (!ParseMetadata(json, &meta, &has_meta)) return false;
  if (!has_meta) return true;
  std::string_view uid;
  if (meta["uid"].get_string().get(uid) == simdjson::SUCCESS) out->uid = std::string(uid);
  simdjson::dom::element refs_element;
  simdjson::dom::array refs;
  if (meta["ownerReferences"].get(refs_element) != simdjson::SUCCESS ||
      refs_element.get_array().get(refs) != simdjson::SUCCESS) {
    return true;
  }
  for (simdjson::dom::element ref : refs) {
    std::string_view owner;
    if (ref["uid"].get_string().get(owner) == simdjson::SUCCESS) {
      out->owner_uids.push_back(std::string(owner));
    }
  }
  return true;
}

}  // namespace

std::map<std::string, std::string> ExtractLabels(absl::string_view json) {
  std::map<std::string, std::string> labels;
  if (FastLabels(json, &labels)) return labels;
  nlohmann::json j = nlohmann::json::parse(json.begin(), json.end(), nullptr, false);
  if (j.is_discarded()) return {};
  return LabelsOf(j);
}

OwnershipFields ReadOwnership(absl::string_view json) {
  OwnershipFields out;
  if (FastOwnership(json, &out)) {
    out.ok = true;
    return out;
  }
  out = OwnershipFields();
  nlohmann::json j = nlohmann::json::parse(json.begin(), json.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return out;
  out.ok = true;
  out.uid = MetaString(j, "uid");
  auto m = j.find("metadata");
  if (m == j.end() || !m->is_object()) return out;
  auto refs = m->find("ownerReferences");
  if (refs == m->end() || !refs->is_array()) return out;
  for (const auto& r : *refs) {
    if (!r.is_object()) continue;
    auto uid = r.find("uid");
    if (uid != r.end() && uid->is_string()) out.owner_uids.push_back(uid->get<std::string>());
  }
  return out;
}

std::string MetaString(const nlohmann::json& object, const char* field) {
  auto m = object.find("metadata");
  if (m == object.end() || !m->is_object()) return "";
  auto f = m->find(field);
  if (f == m->end() || !f->is_string()) return "";
  return f->get<std::string>();
}

bool HasFinalizer(const nlohmann::json& object, absl::string_view finalizer) {
  auto m = object.find("metadata");
  if (m == object.end() || !m->is_object()) return false;
  auto f = m->find("finalizers");
  if (f == m->end() || !f->is_array()) return false;
  return std::any_of(f->begin(), f->end(), [&](const nlohmann::json& x) {
    return x.is_string() && x.get_ref<const std::string&>() == finalizer;
  });
}

void RemoveFinalizer(nlohmann::json& object, absl::string_view finalizer) {
  auto m = object.find("metadata");
  if (m == object.end() || !m->is_object()) return;
  auto f = m->find("finalizers");
  if (f == m->end() || !f->is_array()) return;
  nlohmann::json kept = nlohmann::json::array();
  for (const auto& x : *f) {
    if (!(x.is_string() && x.get_ref<const std::string&>() == finalizer)) kept.push_back(x);
  }
  if (kept.empty()) {
    m->erase("finalizers");
  } else {
    *f = std::move(kept);
  }
}

bool IsBeingDeleted(const nlohmann::json& object) {
  return !MetaString(object, "deletionTimestamp").empty();
}

nlohmann::json ToServed(const ResourceInfo& r, nlohmann::json stored) {
  if (r.conversion) return r.conversion->from_storage(stored);
  stored["apiVersion"] = r.ApiVersion();
  return stored;
}

nlohmann::json ToStored(const ResourceInfo& r, nlohmann::json served) {
  if (r.conversion) return r.conversion->to_storage(served);
  served["apiVersion"] = r.StorageApiVersion();
  return served;
}

bool SpecChanged(const nlohmann::json& a, const nlohmann::json& b) {
  auto strip = [](const nlohmann::json& o) {
    nlohmann::json c = o;
    if (c.is_object()) {
      c.erase("metadata");
      c.erase("status");
      c.erase("apiVersion");
      c.erase("kind");
    }
    return c;
  };
  return strip(a) != strip(b);
}

bool SameObject(const nlohmann::json& a, const nlohmann::json& b) {
  auto strip = [](const nlohmann::json& o) {
    nlohmann::json c = o;
    if (c.is_object() && c.contains("metadata") && c["metadata"].is_object()) {
      c["metadata"].erase("resourceVersion");
      auto mf = c["metadata"].find("managedFields");
      if (mf != c["metadata"].end() && mf->is_array()) {
        for (auto& e : *mf) {
          if (e.is_object()) e.erase("time");
        }
      }
    }
    return c;
  };
  return strip(a) == strip(b);
}

std::string FieldValue(const nlohmann::json& object, absl::string_view path) {
  const nlohmann::json* cur = &object;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    if (!cur->is_object()) return "";
    auto it = cur->find(std::string(part));
    if (it == cur->end()) return "";
    cur = &*it;
  }
  if (cur->is_string()) return cur->get<std::string>();
  if (cur->is_null() || cur->is_object() || cur->is_array()) return "";
  return cur->dump();
}

}  // namespace ctrlhost::apiserver
