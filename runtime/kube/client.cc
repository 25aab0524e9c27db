#include "runtime/kube/client.h"

#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/common/status_macros.h"
#include "runtime/kube/api_status.h"
#include "simdjson.h"

namespace ctrlhost::kube {
namespace {

using simdjson::SUCCESS;
namespace od = simdjson::ondemand;

std::string Str(std::string_view v) { return std::string(v.data(), v.size()); }

void AddParam(std::string* query, absl::string_view key, absl::string_view value) {
  if (value.empty()) return;
  absl::StrAppend(query, query->empty() ? "?" : "&", key, "=", QueryEscape(value));
}

absl::Status Malformed(absl::string_view what, simdjson::error_code error) {
  return absl::DataLossError(
      absl::StrCat("malformed ", what, " from the API server: ", simdjson::error_message(error)));
}

// Cuts a list response into raw items plus metadata without building a tree.
absl::StatusOr<ObjectList> ParseList(const std::string& body) {
  simdjson::padded_string padded(body);
  od::parser parser;
  od::document doc;
  simdjson::error_code error = parser.iterate(padded).get(doc);
  od::object root;
  if (error == SUCCESS) error = doc.get_object().get(root);
  if (error != SUCCESS) return Malformed("list", error);
  ObjectList out;
  for (auto field_result : root) {
    od::field field;
    std::string_view key;
    if ((error = std::move(field_result).get(field)) != SUCCESS ||
        (error = field.unescaped_key().get(key)) != SUCCESS) {
      return Malformed("list", error);
    }
    if (key == "metadata") {
      od::object meta;
      if ((error = field.value().get_object().get(meta)) != SUCCESS) {
        return Malformed("list metadata", error);
      }
      for (auto meta_result : meta) {
        od::field m;
        std::string_view mkey;
        if ((error = std::move(meta_result).get(m)) != SUCCESS ||
            (error = m.unescaped_key().get(mkey)) != SUCCESS) {
          return Malformed("list metadata", error);
        }
        std::string_view value;
        if (mkey == "resourceVersion" || mkey == "continue") {
          if ((error = m.value().get_string().get(value)) != SUCCESS) {
            return Malformed("list metadata", error);
          }
          (mkey == "continue" ? out.continue_token : out.resource_version) = Str(value);
        } else if (mkey == "shardInfo") {
          od::json_type type;
          if ((error = m.value().type().get(type)) != SUCCESS) {
            return Malformed("list metadata", error);
          }
          out.shard_applied = type == od::json_type::object;
        }
      }
    } else if (key == "items") {
      od::value items_value = field.value();
      bool is_null = false;
      if (items_value.is_null().get(is_null) == SUCCESS && is_null) continue;
      od::array items;
      if ((error = items_value.get_array().get(items)) != SUCCESS) {
        return Malformed("list items", error);
      }
      for (auto item_result : items) {
        od::object item;
        std::string_view raw;
        if ((error = item_result.get_object().get(item)) != SUCCESS ||
            (error = item.raw_json().get(raw)) != SUCCESS) {
          return Malformed("list item", error);
        }
        out.items.push_back(Str(raw));
      }
    }
  }
  return out;
}

// One watch line: {"type":"...","object":{...}}.
absl::Status ParseEvent(od::parser* parser, absl::string_view line, WatchEvent* event) {
  simdjson::padded_string padded(line.data(), line.size());
  od::document doc;
  od::object root;
  simdjson::error_code error = parser->iterate(padded).get(doc);
  if (error == SUCCESS) error = doc.get_object().get(root);
  if (error != SUCCESS) return Malformed("watch event", error);
  event->type.clear();
  event->object.clear();
  for (auto field_result : root) {
    od::field field;
    std::string_view key;
    if ((error = std::move(field_result).get(field)) != SUCCESS ||
        (error = field.unescaped_key().get(key)) != SUCCESS) {
      return Malformed("watch event", error);
    }
    if (key == "type") {
      std::string_view type;
      if ((error = field.value().get_string().get(type)) != SUCCESS) {
        return Malformed("watch event type", error);
      }
      event->type = Str(type);
    } else if (key == "object") {
      std::string_view raw;
      od::object object;
      if ((error = field.value().get_object().get(object)) != SUCCESS ||
          (error = object.raw_json().get(raw)) != SUCCESS) {
        return Malformed("watch event object", error);
      }
      event->object = Str(raw);
    }
  }
  if (event->type.empty() || event->object.empty() || event->object[0] != '{') {
    return absl::DataLossError(
        absl::StrCat("malformed watch event from the API server: ", line.substr(0, 200)));
  }
  return absl::OkStatus();
}

// The Status object of an ERROR event as an absl::Status.
absl::Status ErrorEventStatus(const std::string& object) {
  simdjson::padded_string padded(object);
  od::parser parser;
  od::document doc;
  int64_t code = 500;
  if (parser.iterate(padded).get(doc) == SUCCESS) {
    int64_t c;
    if (doc["code"].get_int64().get(c) == SUCCESS && c >= 400 && c < 600) code = c;
  }
  return FromHttpResponse(static_cast<int>(code), object);
}

}  // namespace

std::string QueryEscape(absl::string_view value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(value.size());
  for (unsigned char c : value) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string ResourcePath(const ResourceRef& ref) {
  std::string path = ref.group.empty() ? absl::StrCat("/api/", ref.version)
                                       : absl::StrCat("/apis/", ref.group, "/", ref.version);
  if (!ref.namespace_name.empty()) {
    absl::StrAppend(&path, "/namespaces/", QueryEscape(ref.namespace_name));
  }
  absl::StrAppend(&path, "/", ref.resource);
  if (!ref.name.empty()) absl::StrAppend(&path, "/", QueryEscape(ref.name));
  if (!ref.subresource.empty()) absl::StrAppend(&path, "/", ref.subresource);
  return path;
}

absl::StatusOr<std::string> Client::Get(const ResourceRef& ref) {
  if (ref.name.empty()) return absl::InvalidArgumentError("Get: resource name required");
  ASSIGN_OR_RETURN(RestResponse res, rest_->Do({.method = "GET", .path = ResourcePath(ref)}));
  return std::move(res.body);
}

absl::StatusOr<ObjectList> Client::ListPage(const ResourceRef& ref, const ListOptions& options,
                                            absl::string_view continue_token) {
  ResourceRef collection = ref;
  collection.name.clear();
  std::string query;
  AddParam(&query, "labelSelector", options.label_selector);
  AddParam(&query, "fieldSelector", options.field_selector);
  AddParam(&query, "shardSelector", options.shard_selector);
  if (options.limit > 0) AddParam(&query, "limit", absl::StrCat(options.limit));
  AddParam(&query, "continue", continue_token);
  // The server refuses resourceVersion together with continue.
  if (continue_token.empty()) AddParam(&query, "resourceVersion", options.resource_version);
  ASSIGN_OR_RETURN(RestResponse res, rest_->Do({.method = "GET",
                                                .path = ResourcePath(collection) + query,
                                                .timeout = options.timeout}));
  return ParseList(res.body);
}

absl::StatusOr<ObjectList> Client::List(const ResourceRef& ref, const ListOptions& options) {
  ASSIGN_OR_RETURN(ObjectList all, ListPage(ref, options));
  std::string next = std::move(all.continue_token);
  all.continue_token.clear();
  while (!next.empty()) {
    ASSIGN_OR_RETURN(ObjectList page, ListPage(ref, options, next));
    for (std::string& item : page.items) all.items.push_back(std::move(item));
    next = std::move(page.continue_token);
  }
  return all;
}

absl::Status Client::Watch(const ResourceRef& ref, const WatchOptions& options,
                           const std::function<bool(WatchEvent event)>& on_event,
                           StreamCanceller* canceller) {
  ResourceRef collection = ref;
  collection.name.clear();
  std::string query = "?watch=true";
  AddParam(&query, "resourceVersion", options.resource_version);
  AddParam(&query, "labelSelector", options.label_selector);
  std::string field_selector = options.field_selector;
  if (!ref.name.empty()) {
    // Watching one object is a watch of the collection narrowed to its name.
    field_selector =
        absl::StrCat("metadata.name=", ref.name, field_selector.empty() ? "" : ",", field_selector);
  }
  AddParam(&query, "fieldSelector", field_selector);
  AddParam(&query, "shardSelector", options.shard_selector);
  if (options.timeout_seconds > 0) {
    AddParam(&query, "timeoutSeconds", absl::StrCat(options.timeout_seconds));
  }
  if (options.allow_bookmarks) AddParam(&query, "allowWatchBookmarks", "true");
  if (options.send_initial_events) {
    AddParam(&query, "sendInitialEvents", "true");
    AddParam(&query, "resourceVersionMatch", "NotOlderThan");
  }

  od::parser parser;
  std::string buffer;
  absl::Status result = absl::OkStatus();
  WatchEvent event;
  auto consume = [&](absl::string_view data) {
    buffer.append(data.data(), data.size());
    size_t start = 0;
    while (true) {
      size_t newline = buffer.find('\n', start);
      if (newline == std::string::npos) break;
      absl::string_view line(buffer.data() + start, newline - start);
      start = newline + 1;
      if (line.empty() || line == "\r") continue;
      absl::Status parsed = ParseEvent(&parser, line, &event);
      if (!parsed.ok()) {
        result = parsed;
        return false;
      }
      if (event.type == "ERROR") {
        result = ErrorEventStatus(event.object);
        return false;
      }
      if (!on_event(std::move(event))) {
        buffer.clear();
        return false;
      }
    }
    buffer.erase(0, start);
    return true;
  };
  absl::Status stream = rest_->Stream(
      {.method = "GET", .path = ResourcePath(collection) + query, .timeout = options.idle_timeout},
      consume, canceller, options.on_established);
  if (!result.ok()) return result;
  RETURN_IF_ERROR(stream);
  if (!buffer.empty() && (canceller == nullptr || !canceller->cancelled())) {
    // A server that ends mid-line sent a truncated event.
    return absl::DataLossError("watch stream ended in the middle of an event");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Client::Create(const ResourceRef& ref, absl::string_view object) {
  ResourceRef collection = ref;
  collection.name.clear();
  ASSIGN_OR_RETURN(
      RestResponse res,
      rest_->Do({.method = "POST", .path = ResourcePath(collection), .body = std::string(object)}));
  return std::move(res.body);
}

absl::StatusOr<std::string> Client::Update(const ResourceRef& ref, absl::string_view object) {
  if (ref.name.empty()) return absl::InvalidArgumentError("Update: resource name required");
  ASSIGN_OR_RETURN(
      RestResponse res,
      rest_->Do({.method = "PUT", .path = ResourcePath(ref), .body = std::string(object)}));
  return std::move(res.body);
}

absl::StatusOr<std::string> Client::Patch(const ResourceRef& ref, PatchType type,
                                          absl::string_view patch, const PatchOptions& options) {
  if (ref.name.empty()) return absl::InvalidArgumentError("Patch: resource name required");
  RestRequest request{.method = "PATCH", .body = std::string(patch)};
  std::string query;
  switch (type) {
    case PatchType::kJson:
      request.content_type = "application/json-patch+json";
      break;
    case PatchType::kMerge:
      request.content_type = "application/merge-patch+json";
      request.idempotent = true;  // applying the same merge patch twice gives the same object
      break;
    case PatchType::kStrategicMerge:
      request.content_type = "application/strategic-merge-patch+json";
      break;
    case PatchType::kApply:
      if (options.field_manager.empty()) {
        return absl::InvalidArgumentError("apply patch: field manager required");
      }
      request.content_type = "application/apply-patch+yaml";
      request.idempotent = true;
      if (options.force) AddParam(&query, "force", "true");
      break;
  }
  AddParam(&query, "fieldManager", options.field_manager);
  request.path = ResourcePath(ref) + query;
  ASSIGN_OR_RETURN(RestResponse res, rest_->Do(request));
  return std::move(res.body);
}

absl::StatusOr<std::string> Client::Delete(const ResourceRef& ref, const DeleteOptions& options) {
  if (ref.name.empty()) return absl::InvalidArgumentError("Delete: resource name required");
  std::string body = R"({"kind":"DeleteOptions","apiVersion":"v1")";
  auto quote = [](absl::string_view s) {
    // Values are names, UIDs and resource versions; escape anyway so the body stays JSON.
    std::string out = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\') out.push_back('\\');
      if (static_cast<unsigned char>(c) >= 0x20) out.push_back(c);
    }
    return out + "\"";
  };
  if (!options.propagation_policy.empty()) {
    absl::StrAppend(&body, R"(,"propagationPolicy":)", quote(options.propagation_policy));
  }
  if (options.grace_period_seconds >= 0) {
    absl::StrAppend(&body, R"(,"gracePeriodSeconds":)", options.grace_period_seconds);
  }
  if (!options.precondition_uid.empty() || !options.precondition_resource_version.empty()) {
    absl::StrAppend(&body, R"(,"preconditions":{)");
    const char* sep = "";
    if (!options.precondition_uid.empty()) {
      absl::StrAppend(&body, R"("uid":)", quote(options.precondition_uid));
      sep = ",";
    }
    if (!options.precondition_resource_version.empty()) {
      absl::StrAppend(&body, sep, R"("resourceVersion":)",
                      quote(options.precondition_resource_version));
    }
    body += "}";
  }
  body += "}";
  ASSIGN_OR_RETURN(RestResponse res,
                   rest_->Do({.method = "DELETE", .path = ResourcePath(ref), .body = body}));
  return std::move(res.body);
}

}  // namespace ctrlhost::kube
