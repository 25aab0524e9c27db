#include "runtime/cache/object.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/cache/strip.h"
#include "simdjson.h"

namespace ctrlhost::cache {
namespace {

constexpr absl::string_view kLastApplied = "kubectl.kubernetes.io/last-applied-configuration";

absl::string_view ToAbsl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status FieldError(absl::string_view field, absl::string_view want) {
  return absl::InvalidArgumentError(absl::StrCat("metadata.", field, " must be ", want));
}

// A string-or-null metadata field; null counts as absent.
absl::Status StringField(simdjson::dom::element e, absl::string_view field,
                         absl::string_view* out) {
  if (e.is_null()) return absl::OkStatus();
  std::string_view s;
  if (e.get_string().get(s) != simdjson::SUCCESS) return FieldError(field, "a string");
  *out = ToAbsl(s);
  return absl::OkStatus();
}

absl::Status OwnerField(simdjson::dom::object ref, absl::string_view field,
                        absl::string_view* out) {
  simdjson::dom::element e;
  if (ref[std::string_view(field.data(), field.size())].get(e) != simdjson::SUCCESS) {
    return absl::OkStatus();
  }
  return StringField(e, field, out);
}

absl::Status ParseLabels(simdjson::dom::element e, internal::MetaViews* out) {
  simdjson::dom::object labels;
  if (e.get_object().get(labels) != simdjson::SUCCESS) return FieldError("labels", "an object");
  for (simdjson::dom::key_value_pair kv : labels) {
    std::string_view v;
    if (kv.value.get_string().get(v) != simdjson::SUCCESS) {
      return FieldError("labels", "a map of strings");
    }
    out->labels.emplace_back(ToAbsl(kv.key), ToAbsl(v));
  }
  auto& l = out->labels;
  if (l.size() > 1) {
    std::stable_sort(l.begin(), l.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    // simdjson keeps duplicate keys; the last one wins, as in Go's decoder.
    size_t w = 0;
    for (size_t r = 0; r < l.size(); ++r) {
      if (r + 1 < l.size() && l[r + 1].first == l[r].first) continue;
      l[w++] = l[r];
    }
    l.resize(w);
  }
  return absl::OkStatus();
}

absl::Status ParseFinalizers(simdjson::dom::element e, internal::MetaViews* out) {
  simdjson::dom::array finalizers;
  if (e.get_array().get(finalizers) != simdjson::SUCCESS) {
    return FieldError("finalizers", "an array");
  }
  for (simdjson::dom::element f : finalizers) {
    std::string_view v;
    if (f.get_string().get(v) != simdjson::SUCCESS) {
      return FieldError("finalizers", "an array of strings");
    }
    out->finalizers.push_back(ToAbsl(v));
  }
  return absl::OkStatus();
}

absl::Status ParseOwners(simdjson::dom::element e, internal::MetaViews* out) {
  simdjson::dom::array refs;
  if (e.get_array().get(refs) != simdjson::SUCCESS) {
    return FieldError("ownerReferences", "an array");
  }
  for (simdjson::dom::element r : refs) {
    simdjson::dom::object ref;
    if (r.get_object().get(ref) != simdjson::SUCCESS) {
      return FieldError("ownerReferences", "an array of objects");
    }
    internal::MetaViews::Owner owner;
    absl::Status s;
    if (!(s = OwnerField(ref, "apiVersion", &owner.api_version)).ok()) return s;
    if (!(s = OwnerField(ref, "kind", &owner.kind)).ok()) return s;
    if (!(s = OwnerField(ref, "name", &owner.name)).ok()) return s;
    if (!(s = OwnerField(ref, "uid", &owner.uid)).ok()) return s;
    bool controller = false;
    if (ref["controller"].get_bool().get(controller) == simdjson::SUCCESS) {
      owner.controller = controller;
    }
    out->owners.push_back(owner);
  }
  return absl::OkStatus();
}

bool HasLastApplied(simdjson::dom::element e) {
  simdjson::dom::object annotations;
  if (e.get_object().get(annotations) != simdjson::SUCCESS) return false;
  for (simdjson::dom::key_value_pair kv : annotations) {
    if (ToAbsl(kv.key) == kLastApplied) return true;
  }
  return false;
}

// One pass over metadata's members (instead of a lookup per field). As with a lookup, the
// first occurrence of a duplicated member is the one read. Sets *needs_stripping when a member
// the options strip is present.
absl::Status ParseMeta(simdjson::dom::object meta, const ParseOptions& options,
                       internal::MetaViews* out, bool* needs_stripping) {
  enum Seen : uint32_t {
    kNamespace = 1,
    kName = 2,
    kUid = 4,
    kResourceVersion = 8,
    kDeletion = 16,
    kGeneration = 32,
    kLabels = 64,
    kFinalizers = 128,
    kOwners = 256,
  };
  uint32_t seen = 0;
  auto first = [&seen](Seen bit) {
    if (seen & bit) return false;
    seen |= bit;
    return true;
  };
  absl::Status s;
  for (simdjson::dom::key_value_pair kv : meta) {
    const absl::string_view key = ToAbsl(kv.key);
    if (key.empty()) continue;
    switch (key[0]) {
      case 'n':
        if (key == "namespace" && first(kNamespace)) {
          s = StringField(kv.value, key, &out->namespace_);
        } else if (key == "name" && first(kName)) {
          s = StringField(kv.value, key, &out->name);
        }
        break;
      case 'u':
        if (key == "uid" && first(kUid)) s = StringField(kv.value, key, &out->uid);
        break;
      case 'r':
        if (key == "resourceVersion" && first(kResourceVersion)) {
          s = StringField(kv.value, key, &out->resource_version);
        }
        break;
      case 'd':
        if (key == "deletionTimestamp" && first(kDeletion)) {
          s = StringField(kv.value, key, &out->deletion_timestamp);
        }
        break;
      case 'g':
        if (key == "generation" && first(kGeneration) && !kv.value.is_null() &&
            kv.value.get_int64().get(out->generation) != simdjson::SUCCESS) {
          s = FieldError(key, "an integer");
        }
        break;
      case 'l':
        if (key == "labels" && first(kLabels) && !kv.value.is_null()) {
          s = ParseLabels(kv.value, out);
        }
        break;
      case 'f':
        if (key == "finalizers" && first(kFinalizers) && !kv.value.is_null()) {
          s = ParseFinalizers(kv.value, out);
        }
        break;
      case 'o':
        if (key == "ownerReferences" && first(kOwners) && !kv.value.is_null()) {
          s = ParseOwners(kv.value, out);
        }
        break;
      case 'm':
        if (options.strip_managed_fields && key == "managedFields") *needs_stripping = true;
        break;
      case 'a':
        if (options.strip_last_applied && key == "annotations" && HasLastApplied(kv.value)) {
          *needs_stripping = true;
        }
        break;
      default:
        break;
    }
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

namespace internal {

void MetaViews::Clear() {
  namespace_ = name = uid = resource_version = deletion_timestamp = absl::string_view();
  generation = 0;
  labels.clear();
  owners.clear();
  finalizers.clear();
}

}  // namespace internal

Object::Object(absl::string_view json, const ObjectMeta& meta)
    : Object(absl::MakeConstSpan(&json, 1), [&meta] {
        internal::MetaViews v;
        v.namespace_ = meta.namespace_;
        v.name = meta.name;
        v.uid = meta.uid;
        v.resource_version = meta.resource_version;
        v.deletion_timestamp = meta.deletion_timestamp;
        v.generation = meta.generation;
        for (const auto& [k, val] : meta.labels) v.labels.emplace_back(k, val);
        for (const auto& o : meta.owner_references) {
          v.owners.push_back({o.api_version, o.kind, o.name, o.uid, o.controller});
        }
        for (const auto& f : meta.finalizers) v.finalizers.emplace_back(f);
        return v;
      }()) {}

Object::Object(absl::Span<const absl::string_view> json_pieces, const internal::MetaViews& meta) {
  size_t json_size = 0;
  for (absl::string_view p : json_pieces) json_size += p.size();
  const size_t key_size =
      meta.namespace_.empty() ? meta.name.size() : meta.namespace_.size() + 1 + meta.name.size();
  label_count_ = static_cast<uint32_t>(meta.labels.size());
  owner_count_ = static_cast<uint32_t>(meta.owners.size());
  finalizer_count_ = static_cast<uint32_t>(meta.finalizers.size());
  size_t total = FinalizersOffset() + finalizer_count_ * sizeof(Span);
  total += json_size + key_size + meta.uid.size() + meta.resource_version.size() +
           meta.deletion_timestamp.size();
  for (const auto& [k, v] : meta.labels) total += k.size() + v.size();
  for (const auto& o : meta.owners) {
    total += o.api_version.size() + o.kind.size() + o.name.size() + o.uid.size();
  }
  for (absl::string_view f : meta.finalizers) total += f.size();
  // Offsets are 32-bit: ObjectParser refuses inputs over kMaxObjectBytes (a Kubernetes object
  // is at most a few MB: etcd's limit is 1.5 MiB).
  data_size_ = static_cast<uint32_t>(std::min<size_t>(total, std::numeric_limits<uint32_t>::max()));
  data_ = std::unique_ptr<char[]>(new char[total == 0 ? 1 : total]);
  char* const base = data_.get();
  size_t at = FinalizersOffset() + finalizer_count_ * sizeof(Span);  // strings after tables
  auto append = [&](absl::string_view s) {
    Span span{static_cast<uint32_t>(at), static_cast<uint32_t>(s.size())};
    if (!s.empty()) std::memcpy(base + at, s.data(), s.size());
    at += s.size();
    return span;
  };
  json_.offset = static_cast<uint32_t>(at);
  for (absl::string_view p : json_pieces) append(p);
  json_.size = static_cast<uint32_t>(json_size);
  // The key is "namespace/name" (or "name"); namespace and name are views into it.
  key_.offset = static_cast<uint32_t>(at);
  key_.size = static_cast<uint32_t>(key_size);
  if (meta.namespace_.empty()) {
    name_ = append(meta.name);
  } else {
    namespace_span_ = append(meta.namespace_);
    append("/");
    name_ = append(meta.name);
  }
  uid_ = append(meta.uid);
  resource_version_ = append(meta.resource_version);
  deletion_timestamp_ = append(meta.deletion_timestamp);
  generation_ = meta.generation;
  for (size_t i = 0; i < meta.labels.size(); ++i) {
    LabelSpans l;
    l.key = append(meta.labels[i].first);
    l.value = append(meta.labels[i].second);
    std::memcpy(base + i * sizeof(LabelSpans), &l, sizeof(l));
  }
  for (size_t i = 0; i < meta.owners.size(); ++i) {
    const auto& o = meta.owners[i];
    OwnerSpans spans;
    spans.api_version = append(o.api_version);
    spans.kind = append(o.kind);
    spans.name = append(o.name);
    spans.uid = append(o.uid);
    spans.controller = o.controller ? 1 : 0;
    std::memcpy(base + OwnersOffset() + i * sizeof(OwnerSpans), &spans, sizeof(spans));
  }
  for (size_t i = 0; i < meta.finalizers.size(); ++i) {
    const Span f = append(meta.finalizers[i]);
    std::memcpy(base + FinalizersOffset() + i * sizeof(Span), &f, sizeof(f));
  }
}

std::optional<absl::string_view> Object::Label(absl::string_view key) const {
  size_t lo = 0;
  size_t hi = label_count_;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (label(mid).first < key) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo == label_count_) return std::nullopt;
  auto [k, v] = label(lo);
  if (k != key) return std::nullopt;
  return v;
}

ObjectMeta Object::meta() const {
  ObjectMeta meta;
  meta.namespace_ = std::string(namespace_());
  meta.name = std::string(name());
  meta.uid = std::string(uid());
  meta.resource_version = std::string(resource_version());
  meta.generation = generation_;
  for (size_t i = 0; i < label_count_; ++i) {
    auto [k, v] = label(i);
    meta.labels.emplace_back(k, v);
  }
  for (size_t i = 0; i < owner_count_; ++i) {
    const OwnerSpans o = Owner(i);
    meta.owner_references.push_back(
        OwnerReference{std::string(View(o.api_version)), std::string(View(o.kind)),
                       std::string(View(o.name)), std::string(View(o.uid)), o.controller != 0});
  }
  meta.deletion_timestamp = std::string(deletion_timestamp());
  for (size_t i = 0; i < finalizer_count_; ++i) meta.finalizers.emplace_back(finalizer(i));
  return meta;
}

size_t Object::MemoryBytes() const { return sizeof(Object) + data_size_; }

std::string ObjectKey(absl::string_view namespace_, absl::string_view name) {
  if (namespace_.empty()) return std::string(name);
  return absl::StrCat(namespace_, "/", name);
}

struct ObjectParser::Impl {
  simdjson::dom::parser parser;
  // Reused for every object: the vectors keep their capacity.
  internal::MetaViews meta;
  StripCuts cuts;
  std::vector<absl::string_view> pieces;
};

ObjectParser::ObjectParser(ParseOptions options)
    : options_(options), impl_(std::make_unique<Impl>()) {}

ObjectParser::~ObjectParser() = default;

absl::StatusOr<std::shared_ptr<const Object>> ObjectParser::Parse(absl::string_view json) {
  if (json.size() > kMaxObjectBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("object is larger than ", kMaxObjectBytes, " bytes"));
  }
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
  internal::MetaViews& parsed = impl_->meta;
  parsed.Clear();
  bool needs_stripping = false;
  absl::Status status = ParseMeta(meta, options_, &parsed, &needs_stripping);
  if (!status.ok()) return status;
  if (parsed.name.empty()) return absl::InvalidArgumentError("object has no metadata.name");

  if (!needs_stripping) {
    return std::shared_ptr<const Object>(
        std::make_shared<Object>(absl::MakeConstSpan(&json, 1), parsed));
  }
  // The document is valid JSON (simdjson accepted it), so the scanner only locates members.
  StripCuts& cuts = impl_->cuts;
  // The DOM parse left stage 1's structural indexes in the parser (a public member documented
  // as private "for benchmarking access"; Debian pins simdjson 3.0.1, and strip_test checks
  // the result against the byte scanner). Walking them skips managedFields token by token.
  const simdjson::internal::dom_parser_implementation* stage1 = impl_->parser.implementation.get();
  const StripSelection selection{options_.strip_managed_fields, options_.strip_last_applied};
  if (stage1 != nullptr && stage1->structural_indexes != nullptr) {
    status = FindStripCutsInTokens(
        json, absl::MakeConstSpan(stage1->structural_indexes.get(), stage1->n_structural_indexes),
        selection, &cuts);
  } else {
    status = FindStripCuts(json, selection, &cuts);
  }
  if (!status.ok()) return status;
  std::vector<absl::string_view>& pieces = impl_->pieces;
  pieces.clear();
  size_t at = 0;
  for (const ByteRange& cut : cuts) {
    pieces.push_back(json.substr(at, cut.begin - at));
    at = cut.end;
  }
  pieces.push_back(json.substr(at));
  return std::shared_ptr<const Object>(std::make_shared<Object>(pieces, parsed));
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
