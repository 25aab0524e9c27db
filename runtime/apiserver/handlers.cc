// Dispatch, discovery and the read verbs (get, list, watch). Writes are in handlers_write.cc,
// deletions in handlers_delete.cc.
#include "runtime/apiserver/handlers.h"

#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/apiserver/handlers_internal.h"
#include "runtime/apiserver/list_tokens.h"
#include "runtime/apiserver/object_util.h"
#include "runtime/apiserver/openapi/openapi.h"
#include "runtime/common/logging.h"
#include "runtime/common/status_macros.h"
#include "runtime/kube/api_status.h"
#include "runtime/kube/selector.h"

namespace ctrlhost::apiserver {

std::string Dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ApiHandlers::ApiHandlers(Store* store, ResourceRegistry* registry, common::Clock* clock,
                         HandlerOptions options)
    : store_(store), registry_(registry), clock_(clock), options_(std::move(options)) {}

ApiResponse ApiHandlers::Handle(const ApiRequest& request) {
  absl::StatusOr<ApiResponse> r = absl::InternalError("not served");
  try {
    r = Dispatch(request);
  } catch (const std::exception& e) {
    // A JSON access that does not hold for some input is a defect of ours: the client gets a
    // 500 Status (httplib would answer a bare 500 with the exception's text in a header).
    r = kube::InternalError(absl::StrCat("internal error serving the request: ", e.what()));
  }
  if (r.ok()) return *std::move(r);
  auto [code, body] = kube::ToHttpResponse(r.status());
  if (code >= 500) {
    common::LogWarning("request failed", {{"method", request.method},
                                          {"path", request.path},
                                          {"code", code},
                                          {"error", r.status()}});
  }
  ApiResponse resp;
  resp.code = code;
  resp.body = std::move(body);
  return resp;
}

absl::StatusOr<ApiResponse> ApiHandlers::Dispatch(const ApiRequest& req) {
  auto watch_it = req.query.find("watch");
  ASSIGN_OR_RETURN(
      RequestInfo info,
      ParseRequestInfo(req.method, req.path, watch_it == req.query.end() ? "" : watch_it->second));
  if (!info.is_resource_request) return Discovery(info, req);
  ASSIGN_OR_RETURN(Target t, Resolve(info));
  const std::string& verb = info.verb;
  if (t.subresource == "scale") return Scale(t, req, verb);
  if (verb == "get") return Get(t, req);
  if (verb == "list") return List(t, req);
  if (verb == "watch") return Watch(t, req);
  if (verb == "create") return Create(t, req);
  if (verb == "update") return Update(t, req);
  if (verb == "patch") return Patch(t, req);
  if (verb == "delete") return Delete(t, req);
  if (verb == "deletecollection") return DeleteCollection(t, req);
  return kube::MethodNotAllowedError(absl::StrCat("verb ", verb, " is not supported"));
}

absl::StatusOr<ApiResponse> ApiHandlers::Discovery(const RequestInfo& info, const ApiRequest& req) {
  if (req.method != "GET" && req.method != "HEAD") {
    return kube::MethodNotAllowedError(
        absl::StrCat("the server does not allow ", req.method, " on ", req.path));
  }
  const auto& p = info.parts;
  if (!p.empty() && (p[0] == "healthz" || p[0] == "livez" || p[0] == "readyz") && p.size() <= 2) {
    // Answering at all is the check: the store and handlers are up once requests arrive.
    ApiResponse resp;
    resp.content_type = "text/plain; charset=utf-8";
    resp.body = "ok";
    return resp;
  }
  if (!p.empty() && p[0] == "openapi") {
    auto hash = req.query.find("hash");
    ASSIGN_OR_RETURN(openapi::OpenApiResponse doc,
                     openapi::ServeOpenApi(*registry_, req.path, req.accept,
                                           hash == req.query.end() ? "" : hash->second,
                                           options_.server_version));
    ApiResponse resp;
    resp.code = doc.code;
    resp.content_type = std::move(doc.content_type);
    resp.body = std::move(doc.body);
    resp.headers = std::move(doc.headers);
    return resp;
  }
  nlohmann::json body;
  if (p.size() == 1 && p[0] == "version") {
    body = {{"major", "1"},
            {"minor", "32"},
            {"gitVersion", options_.server_version},
            {"gitCommit", "ctrlhost"},
            {"gitTreeState", "clean"},
            {"buildDate", "2026-11-21T00:00:00Z"},
            {"goVersion", "n/a"},
            {"compiler", "c++"},
            {"platform", "linux/amd64"}};
  } else if (p.size() == 1 && p[0] == "api") {
    body = registry_->CoreApiVersions();
  } else if (p.size() == 2 && p[0] == "api") {
    ASSIGN_OR_RETURN(body, registry_->ResourceList("", p[1]));
  } else if (p.size() == 1 && p[0] == "apis") {
    body = registry_->ApiGroupList();
  } else if (p.size() == 2 && p[0] == "apis") {
    ASSIGN_OR_RETURN(body, registry_->ApiGroup(p[1]));
  } else if (p.size() == 3 && p[0] == "apis") {
    ASSIGN_OR_RETURN(body, registry_->ResourceList(p[1], p[2]));
  } else {
    return kube::ApiError(404, "NotFound", "the server could not find the requested resource");
  }
  ApiResponse resp;
  resp.body = Dump(body);
  return resp;
}

absl::StatusOr<ApiHandlers::Target> ApiHandlers::Resolve(const RequestInfo& info) const {
  ResourcePtr r = registry_->Find(info.group, info.version, info.resource);
  if (r == nullptr) {
    return kube::ApiError(404, "NotFound", "the server could not find the requested resource");
  }
  if (!info.subresource.empty() && !(info.subresource == "status" && r->has_status) &&
      !(info.subresource == "scale" && r->scale != nullptr) &&
      !(info.subresource == "finalize" && r->resource == "namespaces" && r->group.empty())) {
    return kube::ApiError(404, "NotFound", "the server could not find the requested resource");
  }
  if (!r->namespaced && !info.namespace_.empty()) {
    return kube::ApiError(404, "NotFound", "the server could not find the requested resource");
  }
  if (r->namespaced && info.namespace_.empty() && !info.name.empty()) {
    return kube::ApiError(404, "NotFound", "the server could not find the requested resource");
  }
  if (r->namespaced && info.namespace_.empty() &&
      (info.verb == "create" || info.verb == "deletecollection")) {
    return kube::ApiError(404, "NotFound", "the server could not find the requested resource");
  }
  Target t;
  t.r = std::move(r);
  t.ns = info.namespace_;
  t.name = info.name;
  t.subresource = info.subresource;
  return t;
}

ApiResponse ApiHandlers::ObjectResponse(int code, const ResourceInfo& r,
                                        const StoredObject& stored) const {
  ApiResponse resp;
  resp.code = code;
  resp.body = ServedBytes(r, stored.value);
  return resp;
}

absl::Status CheckIntact(const StoredObject& o) {
  if (!o.corrupt) return absl::OkStatus();
  return kube::InternalError(absl::StrCat(
      "the stored object ", o.key,
      " is corrupt: its checksum does not match (bytes changed on disk); restore state.db from "
      "a backup, or delete the object"));
}

std::string ServedBytes(const ResourceInfo& r, const std::string& stored_value) {
  if (!r.conversion && r.ApiVersion() == r.StorageApiVersion()) return stored_value;
  nlohmann::json j = nlohmann::json::parse(stored_value, nullptr, false);
  if (j.is_discarded()) return stored_value;
  return Dump(ToServed(r, std::move(j)));
}

absl::StatusOr<ApiResponse> ApiHandlers::Get(const Target& t, const ApiRequest& req) {
  ObjectPtr obj = store_->Get(t.r->Key(t.ns, t.name));
  if (obj == nullptr) return kube::NotFoundError(t.r->group, t.r->resource, t.name);
  RETURN_IF_ERROR(CheckIntact(*obj));
  if (WantsTable(req.accept)) {
    ASSIGN_OR_RETURN(TableOptions table_options, TableOptionsOf(req));
    ApiResponse resp;
    resp.content_type = "application/json";
    resp.body = Dump(TableOf(*t.r, {obj}, store_->Revision(), "", clock_->Now(), table_options));
    return resp;
  }
  if (WantsPartialMetadata(req.accept)) {
    ApiResponse resp;
    resp.content_type = "application/json";
    resp.body = PartialMetadataBytes(obj->value);
    return resp;
  }
  return ObjectResponse(200, *t.r, *obj);
}

absl::StatusOr<ObjectFilter> ApiHandlers::MakeFilter(const Target& t, const ApiRequest& req) const {
  ObjectFilter f;
  auto ls = req.query.find("labelSelector");
  if (ls != req.query.end() && !ls->second.empty()) {
    auto sel = kube::LabelSelector::Parse(ls->second);
    if (!sel.ok()) return kube::BadRequestError(sel.status().message());
    f.labels = std::make_shared<kube::LabelSelector>(*std::move(sel));
  }
  auto fs = req.query.find("fieldSelector");
  if (fs != req.query.end() && !fs->second.empty()) {
    auto sel = kube::FieldSelector::Parse(fs->second);
    if (!sel.ok()) return kube::BadRequestError(sel.status().message());
    absl::flat_hash_set<std::string> supported = {"metadata.name", "metadata.namespace"};
    for (const auto& e : t.r->extra_field_selectors) supported.insert(e);
    absl::Status v = sel->ValidateFields(supported);
    if (!v.ok()) return kube::BadRequestError(v.message());
    for (const auto& e : t.r->extra_field_selectors) {
      if (absl::StrContains(fs->second, e)) f.needs_parse = true;
    }
    f.fields = std::make_shared<kube::FieldSelector>(*std::move(sel));
    f.extra_fields = t.r->extra_field_selectors;
  }
  auto shard = req.query.find("shardSelector");
  if (options_.shard_selectors && shard != req.query.end() && !shard->second.empty()) {
    absl::StatusOr<kube::ShardSelector> parsed = kube::ShardSelector::Parse(shard->second);
    if (!parsed.ok()) {
      return kube::InvalidError(
          "meta.k8s.io", "ListOptions", "",
          {{"FieldValueInvalid", std::string(parsed.status().message()), "shardSelector"}});
    }
    f.shard = std::make_shared<kube::ShardSelector>(*std::move(parsed));
  }
  f.namespaced = t.r->namespaced;
  return f;
}

bool ObjectFilter::Matches(const StoredObject& o) const {
  if (labels != nullptr && !labels->Matches(o.labels)) return false;
  if (fields == nullptr && shard == nullptr) return true;
  // Keys are "/group/resource/[ns/]name".
  std::vector<absl::string_view> parts = absl::StrSplit(o.key, '/');
  if (shard != nullptr) {
    if (shard->field() == kube::ShardSelector::Field::kNamespace) {
      if (!shard->Matches(namespaced && parts.size() >= 5 ? parts[3] : "")) return false;
    } else if (!shard->Matches(ReadOwnership(o.value).uid)) {
      return false;
    }
  }
  if (fields == nullptr) return true;
  std::map<std::string, std::string> values;
  if (namespaced && parts.size() >= 5) {
    values["metadata.namespace"] = std::string(parts[3]);
    values["metadata.name"] = std::string(parts[4]);
  } else if (parts.size() >= 4) {
    values["metadata.namespace"] = "";
    values["metadata.name"] = std::string(parts[3]);
  }
  if (needs_parse) {
    nlohmann::json j = nlohmann::json::parse(o.value, nullptr, false);
    if (!j.is_discarded()) {
      for (const auto& e : extra_fields) values[e] = FieldValue(j, e);
    }
  }
  return fields->Matches(values);
}

namespace {

// A list of more items than this is streamed in chunks of about kListChunkBytes; a smaller one
// is answered in one body (with a Content-Length, and callers of Handle() get it whole).
constexpr size_t kListItemsInOneBody = 500;
constexpr size_t kListChunkBytes = 256 * 1024;

std::string QueryOr(const ApiRequest& req, const char* key, std::string def = "") {
  auto it = req.query.find(key);
  return it == req.query.end() ? def : it->second;
}

// A LIST answer written piece by piece: `head` (which opens the array of items or rows), the
// items' texts joined by commas, then "]}". An item's ObjectPtr is reset once its text is
// written, so the memory of an object deleted meanwhile goes as soon as it is sent. Not
// thread-safe: one writer per answer.
class ListWriter {
 public:
  // The text of one item, or nullopt to leave the item out (a Table does so with an object
  // that is not JSON).
  using ItemBytes = std::function<std::optional<std::string>(const StoredObject&)>;

  ListWriter(std::string head, std::vector<ObjectPtr> items, ItemBytes item_bytes)
      : head_(std::move(head)), items_(std::move(items)), item_bytes_(std::move(item_bytes)) {}

  // The next part of the answer: items until it holds `bytes` or more (the head counts in the
  // first part), and the closing "]}" in the last. done() once the last part is returned.
  std::string Next(size_t bytes) {
    std::string out = std::move(head_);
    head_.clear();
    while (next_ < items_.size() && out.size() < bytes) {
      std::optional<std::string> text = item_bytes_(*items_[next_]);
      items_[next_].reset();
      ++next_;
      if (!text.has_value()) continue;
      if (wrote_item_) out.push_back(',');
      wrote_item_ = true;
      out.append(*text);
    }
    if (next_ == items_.size()) {
      out.append("]}");
      done_ = true;
    }
    return out;
  }
  bool done() const { return done_; }

 private:
  std::string head_;
  std::vector<ObjectPtr> items_;
  ItemBytes item_bytes_;
  size_t next_ = 0;  // items_[next_] is the next item to write
  bool wrote_item_ = false;
  bool done_ = false;
};

// The body of a LIST answer: a Table, a PartialObjectMetadataList, or the kind's list. One body
// up to kListItemsInOneBody items, else streamed item by item (row by row for a Table) rather
// than built whole: eight concurrent LISTs of a 205 MB namespace held eight copies of it
// (1.9 GB RSS), and a Table of 20,000 ConfigMaps built whole (as JSON, then as text) took
// 150 MB for 23 MB of text. The items are the store's shared immutable objects, so the list
// still reflects one revision.
absl::StatusOr<ApiResponse> ListBody(const ResourcePtr& r, const ApiRequest& req,
                                     Store::ListResult result, const std::string& next,
                                     absl::Time now, const kube::ShardSelector* shard) {
  std::string head;
  ListWriter::ItemBytes item_bytes;
  if (WantsTable(req.accept)) {
    ASSIGN_OR_RETURN(TableOptions table_options, TableOptionsOf(req));
    // One `now` for every row (the Age columns), however long the answer is streamed for.
    TableFormat table(*r, now, table_options);
    head = table.HeadBytes(result.revision, next, shard != nullptr ? shard->text() : "");
    item_bytes = [r, table](const StoredObject& o) { return table.RowBytes(o); };
  } else {
    const bool metadata_only = WantsPartialMetadata(req.accept);
    head = absl::StrCat(
        "{\"kind\":", Dump(metadata_only ? std::string("PartialObjectMetadataList") : r->list_kind),
        ",\"apiVersion\":", Dump(metadata_only ? std::string("meta.k8s.io/v1") : r->ApiVersion()),
        ",\"metadata\":{\"resourceVersion\":\"", result.revision, "\"");
    if (!next.empty()) absl::StrAppend(&head, ",\"continue\":\"", next, "\"");
    // KEP-5866: the applied shard selector, so that a client knows the list is its shard only.
    if (shard != nullptr)
      absl::StrAppend(&head, ",\"shardInfo\":{\"selector\":", Dump(shard->text()), "}");
    head.append("},\"items\":[");
    item_bytes = [r, metadata_only](const StoredObject& o) -> std::optional<std::string> {
      return metadata_only ? PartialMetadataBytes(o.value) : ServedBytes(*r, o.value);
    };
  }
  const bool one_body = result.items.size() <= kListItemsInOneBody;
  auto writer =
      std::make_shared<ListWriter>(std::move(head), std::move(result.items), std::move(item_bytes));
  ApiResponse resp;
  if (one_body) {
    resp.body = writer->Next(std::numeric_limits<size_t>::max());
    return resp;
  }
  resp.stream = [writer](const std::function<bool(absl::string_view)>& write) {
    const std::string chunk = writer->Next(kListChunkBytes);
    if (!write(chunk)) return false;
    return !writer->done();
  };
  return resp;
}

}  // namespace

absl::StatusOr<ApiResponse> ApiHandlers::List(const Target& t, const ApiRequest& req) {
  ASSIGN_OR_RETURN(ObjectFilter filter, MakeFilter(t, req));
  Store::ListOptions opts;
  opts.prefix = t.ns.empty() ? t.r->KeyPrefix() : t.r->NamespacePrefix(t.ns);
  if (!filter.Empty()) {
    opts.filter = [&filter](const StoredObject& o) { return filter.Matches(o); };
  }
  const std::string limit_s = QueryOr(req, "limit");
  if (!limit_s.empty()) {
    int64_t limit = 0;
    if (!absl::SimpleAtoi(limit_s, &limit) || limit < 0) {
      return kube::BadRequestError(absl::StrCat("invalid limit \"", limit_s, "\""));
    }
    opts.limit = static_cast<size_t>(limit);
  }
  const std::string cont = QueryOr(req, "continue");
  const std::string rv = QueryOr(req, "resourceVersion");
  const std::string match = QueryOr(req, "resourceVersionMatch");
  if (!cont.empty()) {
    if (!rv.empty() && rv != "0") {
      return kube::BadRequestError(
          "specifying resource version is not allowed when using continue");
    }
    ASSIGN_OR_RETURN(ContinueToken tok, DecodeContinue(cont));
    if (!absl::StartsWith(tok.key, opts.prefix)) {
      return kube::BadRequestError("invalid continue token: it belongs to another list");
    }
    opts.revision = tok.revision;
    opts.after_key = tok.key;
    if (tok.revision <= store_->CompactedRevision()) {
      return kube::GoneError(
          "the continue token is too old: the list it continues can no longer be served "
          "consistently; start a new list without the continue parameter");
    }
  } else if (!rv.empty()) {
    ASSIGN_OR_RETURN(int64_t want, ParseResourceVersion(rv));
    if (match == "Exact") {
      if (want == 0) {
        return kube::BadRequestError("resourceVersionMatch=Exact requires a resourceVersion");
      }
      opts.revision = want;
    } else if (match.empty() || match == "NotOlderThan") {
      if (want > store_->Revision()) {
        return kube::TimeoutError(
            absl::StrCat("Too large resource version: ", want, ", current: ", store_->Revision()));
      }
    } else {
      return kube::BadRequestError(
          absl::StrCat("unsupported resourceVersionMatch \"", match, "\""));
    }
  } else if (!match.empty()) {
    return kube::BadRequestError("resourceVersionMatch requires a resourceVersion");
  }

  auto result = store_->List(opts);
  if (!result.ok()) {
    if (kube::IsGone(result.status()) && !cont.empty()) {
      return kube::GoneError(
          "the continue token is too old: the list it continues can no longer be served "
          "consistently; start a new list without the continue parameter");
    }
    return result.status();
  }
  for (const ObjectPtr& o : result->items) RETURN_IF_ERROR(CheckIntact(*o));
  std::string next;
  if (result->more) next = EncodeContinue(result->revision, result->last_key);

  return ListBody(t.r, req, *std::move(result), next, clock_->Now(), filter.shard.get());
}

}  // namespace ctrlhost::apiserver
