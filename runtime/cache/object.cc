#include "runtime/cache/object.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "simdjson.h"

namespace ctrlhost::cache {
namespace {

constexpr absl::string_view kLastApplied = "kubectl.kubernetes.io/last-applied-configuration";

bool KeyIs(std::string_view key, absl::string_view want) {
  return key.size() == want.size() && std::equal(key.begin(), key.end(), want.begin());
}

// Appends `s` as a JSON string literal.
void AppendJsonString(std::string* out, std::string_view s) {
  out->push_back('"');
  for (char c : s) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          static const char kHex[] = "0123456789abcdef";
          out->append("\\u00");
          out->push_back(kHex[(c >> 4) & 0xf]);
          out->push_back(kHex[c & 0xf]);
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

absl::Status FieldError(absl::string_view field, absl::string_view want) {
  return absl::InvalidArgumentError(absl::StrCat("metadata.", field, " must be ", want));
}

// Copies metadata[field] into *out when present; a present non-string is an error.
absl::Status GetString(simdjson::dom::object meta, absl::string_view field, std::string* out) {
  simdjson::dom::element e;
  if (meta[std::string_view(field.data(), field.size())].get(e) != simdjson::SUCCESS ||
      e.is_null()) {
    return absl::OkStatus();
  }
  std::string_view s;
  if (e.get_string().get(s) != simdjson::SUCCESS) return FieldError(field, "a string");
  out->assign(s.data(), s.size());
  return absl::OkStatus();
}

absl::Status ParseMeta(simdjson::dom::object meta, ObjectMeta* out) {
  absl::Status s;
  if (!(s = GetString(meta, "namespace", &out->namespace_)).ok()) return s;
  if (!(s = GetString(meta, "name", &out->name)).ok()) return s;
  if (!(s = GetString(meta, "uid", &out->uid)).ok()) return s;
  if (!(s = GetString(meta, "resourceVersion", &out->resource_version)).ok()) return s;
  if (!(s = GetString(meta, "deletionTimestamp", &out->deletion_timestamp)).ok()) return s;
  simdjson::dom::element e;
  if (meta["generation"].get(e) == simdjson::SUCCESS && !e.is_null()) {
    if (e.get_int64().get(out->generation) != simdjson::SUCCESS) {
      return FieldError("generation", "an integer");
    }
  }
  if (meta["labels"].get(e) == simdjson::SUCCESS && !e.is_null()) {
    simdjson::dom::object labels;
    if (e.get_object().get(labels) != simdjson::SUCCESS) return FieldError("labels", "an object");
    for (simdjson::dom::key_value_pair kv : labels) {
      std::string_view v;
      if (kv.value.get_string().get(v) != simdjson::SUCCESS) {
        return FieldError("labels", "a map of strings");
      }
      out->labels.emplace_back(std::string(kv.key), std::string(v));
    }
    std::sort(out->labels.begin(), out->labels.end());
    // simdjson keeps duplicate keys; the last one wins, as in Go's decoder.
    out->labels.erase(std::unique(out->labels.begin(), out->labels.end(),
                                  [](const auto& a, const auto& b) { return a.first == b.first; }),
                      out->labels.end());
  }
  if (meta["finalizers"].get(e) == simdjson::SUCCESS && !e.is_null()) {
    simdjson::dom::array finalizers;
    if (e.get_array().get(finalizers) != simdjson::SUCCESS) {
      return FieldError("finalizers", "an array");
    }
    for (simdjson::dom::element f : finalizers) {
      std::string_view v;
      if (f.get_string().get(v) != simdjson::SUCCESS) {
        return FieldError("finalizers", "an array of strings");
      }
      out->finalizers.emplace_back(v);
    }
  }
  if (meta["ownerReferences"].get(e) == simdjson::SUCCESS && !e.is_null()) {
    simdjson::dom::array refs;
    if (e.get_array().get(refs) != simdjson::SUCCESS) {
      return FieldError("ownerReferences", "an array");
    }
    for (simdjson::dom::element r : refs) {
      simdjson::dom::object ref;
      if (r.get_object().get(ref) != simdjson::SUCCESS) {
        return FieldError("ownerReferences", "an array of objects");
      }
      OwnerReference owner;
      if (!(s = GetString(ref, "apiVersion", &owner.api_version)).ok()) return s;
      if (!(s = GetString(ref, "kind", &owner.kind)).ok()) return s;
      if (!(s = GetString(ref, "name", &owner.name)).ok()) return s;
      if (!(s = GetString(ref, "uid", &owner.uid)).ok()) return s;
      bool controller = false;
      if (ref["controller"].get_bool().get(controller) == simdjson::SUCCESS) {
        owner.controller = controller;
      }
      out->owner_references.push_back(std::move(owner));
    }
  }
  return absl::OkStatus();
}

// Writes metadata without the stripped fields.
void AppendStrippedMeta(simdjson::dom::object meta, const ParseOptions& options, std::string* out) {
  out->push_back('{');
  bool first = true;
  for (simdjson::dom::key_value_pair kv : meta) {
    if (options.strip_managed_fields && KeyIs(kv.key, "managedFields")) continue;
    std::string value;
    simdjson::dom::object annotations;
    if (options.strip_last_applied && KeyIs(kv.key, "annotations") &&
        kv.value.get_object().get(annotations) == simdjson::SUCCESS) {
      value.push_back('{');
      bool first_annotation = true;
      for (simdjson::dom::key_value_pair a : annotations) {
        if (KeyIs(a.key, kLastApplied)) continue;
        if (!first_annotation) value.push_back(',');
        first_annotation = false;
        AppendJsonString(&value, a.key);
        value.push_back(':');
        value.append(simdjson::minify(a.value));
      }
      if (first_annotation) continue;  // nothing left: drop the empty map
      value.push_back('}');
    } else {
      value = simdjson::minify(kv.value);
    }
    if (!first) out->push_back(',');
    first = false;
    AppendJsonString(out, kv.key);
    out->push_back(':');
    out->append(value);
  }
  out->push_back('}');
}

bool NeedsStripping(simdjson::dom::object meta, const ParseOptions& options) {
  simdjson::dom::element e;
  if (options.strip_managed_fields && meta["managedFields"].get(e) == simdjson::SUCCESS) {
    return true;
  }
  if (options.strip_last_applied && meta["annotations"].get(e) == simdjson::SUCCESS) {
    simdjson::dom::object annotations;
    simdjson::dom::element a;
    return e.get_object().get(annotations) == simdjson::SUCCESS &&
           annotations[std::string_view(kLastApplied.data(), kLastApplied.size())].get(a) ==
               simdjson::SUCCESS;
  }
  return false;
}

}  // namespace

Object::Span Object::Append(absl::string_view s) {
  Span span{static_cast<uint32_t>(data_.size()), static_cast<uint32_t>(s.size())};
  data_.append(s.data(), s.size());
  return span;
}

Object::Object(absl::string_view json, const ObjectMeta& meta) {
  const std::string key = ObjectKey(meta.namespace_, meta.name);
  size_t total = json.size() + key.size() + meta.namespace_.size() + meta.name.size() +
                 meta.uid.size() + meta.resource_version.size() + meta.deletion_timestamp.size();
  for (const auto& [k, v] : meta.labels) total += k.size() + v.size();
  for (const auto& o : meta.owner_references) {
    total += o.api_version.size() + o.kind.size() + o.name.size() + o.uid.size();
  }
  for (const auto& f : meta.finalizers) total += f.size();
  data_.reserve(total);  // one allocation; views never move afterwards
  json_ = Append(json);
  key_ = Append(key);
  // Namespace and name are the key's parts when both are set ("ns/name" or "name").
  if (meta.namespace_.empty()) {
    name_ = key_;
  } else {
    namespace_span_ = Span{key_.offset, static_cast<uint32_t>(meta.namespace_.size())};
    name_ = Span{static_cast<uint32_t>(key_.offset + meta.namespace_.size() + 1),
                 static_cast<uint32_t>(meta.name.size())};
  }
  uid_ = Append(meta.uid);
  resource_version_ = Append(meta.resource_version);
  deletion_timestamp_ = Append(meta.deletion_timestamp);
  generation_ = meta.generation;
  labels_.reserve(meta.labels.size());
  for (const auto& [k, v] : meta.labels) {
    Span key_span = Append(k);
    labels_.emplace_back(key_span, Append(v));
  }
  owners_.reserve(meta.owner_references.size());
  for (const auto& o : meta.owner_references) {
    OwnerSpans spans;
    spans.api_version = Append(o.api_version);
    spans.kind = Append(o.kind);
    spans.name = Append(o.name);
    spans.uid = Append(o.uid);
    spans.controller = o.controller;
    owners_.push_back(spans);
  }
  finalizers_.reserve(meta.finalizers.size());
  for (const auto& f : meta.finalizers) finalizers_.push_back(Append(f));
}

std::optional<absl::string_view> Object::Label(absl::string_view key) const {
  auto it = std::lower_bound(
      labels_.begin(), labels_.end(), key,
      [this](const std::pair<Span, Span>& l, absl::string_view k) { return View(l.first) < k; });
  if (it == labels_.end() || View(it->first) != key) return std::nullopt;
  return View(it->second);
}

ObjectMeta Object::meta() const {
  ObjectMeta meta;
  meta.namespace_ = std::string(namespace_());
  meta.name = std::string(name());
  meta.uid = std::string(uid());
  meta.resource_version = std::string(resource_version());
  meta.generation = generation_;
  for (const auto& [k, v] : labels_) meta.labels.emplace_back(View(k), View(v));
  for (const auto& o : owners_) {
    meta.owner_references.push_back(
        OwnerReference{std::string(View(o.api_version)), std::string(View(o.kind)),
                       std::string(View(o.name)), std::string(View(o.uid)), o.controller});
  }
  meta.deletion_timestamp = std::string(deletion_timestamp());
  for (const auto& f : finalizers_) meta.finalizers.emplace_back(View(f));
  return meta;
}

size_t Object::MemoryBytes() const {
  return sizeof(Object) + data_.capacity() + labels_.capacity() * sizeof(labels_[0]) +
         owners_.capacity() * sizeof(OwnerSpans) + finalizers_.capacity() * sizeof(Span);
}

std::string ObjectKey(absl::string_view namespace_, absl::string_view name) {
  if (namespace_.empty()) return std::string(name);
  return absl::StrCat(namespace_, "/", name);
}

struct ObjectParser::Impl {
  simdjson::dom::parser parser;
};

ObjectParser::ObjectParser(ParseOptions options)
    : options_(options), impl_(std::make_unique<Impl>()) {}

ObjectParser::~ObjectParser() = default;

absl::StatusOr<std::shared_ptr<const Object>> ObjectParser::Parse(absl::string_view json) {
  simdjson::dom::element doc;
  // parse(const char*, len, realloc_if_needed=true) copies into a padded internal buffer.
  simdjson::error_code error = impl_->parser.parse(json.data(), json.size(), true).get(doc);
  if (error != simdjson::SUCCESS) {
    return absl::InvalidArgumentError(
        absl::StrCat("object is not valid JSON: ", simdjson::error_message(error)));
  }
  simdjson::dom::object root;
  if (doc.get_object().get(root) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("object is not a JSON object");
  }
  simdjson::dom::object meta;
  if (root["metadata"].get_object().get(meta) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("object has no metadata object");
  }
  ObjectMeta parsed;
  absl::Status status = ParseMeta(meta, &parsed);
  if (!status.ok()) return status;
  if (parsed.name.empty()) return absl::InvalidArgumentError("object has no metadata.name");

  std::string stripped;
  absl::string_view bytes = json;
  if (NeedsStripping(meta, options_)) {
    stripped.reserve(json.size());
    stripped.push_back('{');
    bool first = true;
    for (simdjson::dom::key_value_pair kv : root) {
      if (!first) stripped.push_back(',');
      first = false;
      AppendJsonString(&stripped, kv.key);
      stripped.push_back(':');
      if (KeyIs(kv.key, "metadata")) {
        AppendStrippedMeta(meta, options_, &stripped);
      } else {
        stripped.append(simdjson::minify(kv.value));
      }
    }
    stripped.push_back('}');
    bytes = stripped;
  }
  return std::shared_ptr<const Object>(std::make_shared<Object>(bytes, parsed));
}

absl::StatusOr<std::string> ObjectParser::ParseResourceVersion(absl::string_view json) {
  simdjson::dom::element doc;
  if (impl_->parser.parse(json.data(), json.size(), true).get(doc) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("object is not valid JSON");
  }
  std::string_view rv;
  if (doc["metadata"]["resourceVersion"].get_string().get(rv) != simdjson::SUCCESS || rv.empty()) {
    return absl::InvalidArgumentError("object has no metadata.resourceVersion");
  }
  return std::string(rv);
}

}  // namespace ctrlhost::cache
