#include "runtime/apiserver/openapi/openapi.h"

#include <openssl/evp.h>

#include <map>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/apiserver/openapi/documents.h"
#include "runtime/apiserver/openapi/gnostic.h"
#include "runtime/common/mutex.h"
#include "runtime/common/status_macros.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::apiserver::openapi {
namespace {

using nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Upper-case hex SHA-512 of `data`, as Kubernetes puts in its OpenAPI v3 URLs.
std::string Sha512Hex(absl::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &size, EVP_sha512(), nullptr) != 1) {
    // Only on a broken OpenSSL; a fixed value keeps the URL valid (it just never caches well).
    return "0";
  }
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(size * 2);
  for (unsigned int i = 0; i < size; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0xf]);
  }
  return out;
}

// Identifies the registry state the documents depend on. Schemas are compared by identity:
// crd.cc makes a new shared object for every CRD write, and the snapshot holding this
// fingerprint keeps the old schema objects alive, so an address cannot be reused meanwhile.
std::string Fingerprint(const std::vector<ResourcePtr>& resources,
                        absl::string_view server_version) {
  std::string f(server_version);
  for (const ResourcePtr& r : resources) {
    absl::StrAppend(&f, "|", r->group, "/", r->version, "/", r->resource, "/", r->kind, "/",
                    r->list_kind, "/", r->namespaced, r->has_status, r->custom,
                    r->return_deleted_object, "/", reinterpret_cast<uintptr_t>(r->schema.get()));
  }
  return f;
}

struct Document {
  std::string body;
  std::string hash;
};

// Every document of one registry state. Immutable once built.
struct Snapshot {
  std::string fingerprint;
  std::vector<ResourcePtr> resources;  // keeps the fingerprinted schemas alive
  Document index;
  std::map<std::string, Document> v3;  // by GroupVersionPath
  Document v2_json;
  std::string v2_protobuf;
};

absl::StatusOr<std::shared_ptr<const Snapshot>> BuildSnapshot(std::vector<ResourcePtr> resources,
                                                              std::string fingerprint,
                                                              absl::string_view server_version) {
  auto s = std::make_shared<Snapshot>();
  s->fingerprint = std::move(fingerprint);
  json index_paths = json::object();
  for (const auto& [path, gv] : GroupVersions(resources)) {
    Document d;
    d.body = Dump(V3Document(resources, gv.first, gv.second, server_version));
    d.hash = Sha512Hex(d.body);
    index_paths[path] = {
        {"serverRelativeURL", absl::StrCat("/openapi/v3/", path, "?hash=", d.hash)}};
    s->v3[path] = std::move(d);
  }
  s->index.body = Dump({{"paths", std::move(index_paths)}});
  s->index.hash = Sha512Hex(s->index.body);
  const json v2 = V2Document(resources, server_version);
  s->v2_json.body = Dump(v2);
  s->v2_json.hash = Sha512Hex(s->v2_json.body);
  ASSIGN_OR_RETURN(s->v2_protobuf, SwaggerToGnostic(v2));
  s->resources = std::move(resources);
  return std::shared_ptr<const Snapshot>(std::move(s));
}

// The documents of the latest registry state seen. Content-addressed (by fingerprint), so one
// process-wide cache serves any number of registries correctly.
class SnapshotCache {
 public:
  absl::StatusOr<std::shared_ptr<const Snapshot>> Get(const ResourceRegistry& registry,
                                                      absl::string_view server_version) {
    std::vector<ResourcePtr> resources = registry.All();
    std::string fingerprint = Fingerprint(resources, server_version);
    {
      common::MutexLock lock(&mu_);
      if (latest_ != nullptr && latest_->fingerprint == fingerprint) return latest_;
    }
    // Built outside the lock: concurrent first requests may build twice, never block others.
    ASSIGN_OR_RETURN(std::shared_ptr<const Snapshot> built,
                     BuildSnapshot(std::move(resources), std::move(fingerprint), server_version));
    common::MutexLock lock(&mu_);
    latest_ = built;
    return built;
  }

 private:
  common::Mutex mu_;
  std::shared_ptr<const Snapshot> latest_ ABSL_GUARDED_BY(mu_);
};

SnapshotCache& Cache() {
  static SnapshotCache* cache = new SnapshotCache;
  return *cache;
}

// The media types of an Accept header, in the client's order, without parameters; entries
// with q=0 are left out. Empty when the header is empty (meaning "anything").
std::vector<std::string> AcceptedTypes(absl::string_view accept) {
  std::vector<std::string> out;
  for (absl::string_view entry : absl::StrSplit(accept, ',', absl::SkipWhitespace())) {
    std::vector<absl::string_view> parts = absl::StrSplit(entry, ';');
    bool refused = false;
    for (size_t i = 1; i < parts.size(); ++i) {
      absl::string_view p = absl::StripAsciiWhitespace(parts[i]);
      if (p == "q=0" || p == "q=0.0" || p == "q=0.00" || p == "q=0.000") refused = true;
    }
    if (refused) continue;
    out.push_back(absl::AsciiStrToLower(absl::StripAsciiWhitespace(parts[0])));
  }
  return out;
}

bool AcceptsJson(const std::vector<std::string>& types) {
  if (types.empty()) return true;
  for (const std::string& t : types) {
    if (t == "application/json" || t == "application/*" || t == "*/*") return true;
  }
  return false;
}

absl::Status NotAcceptable(absl::string_view accept) {
  return kube::NotAcceptableError(
      absl::StrCat("only the following media types are accepted: application/json",
                   accept.empty() ? "" : absl::StrCat(" (asked for ", accept, ")")));
}

absl::Status PathNotFound() {
  return kube::ApiError(404, "NotFound", "the server could not find the requested resource");
}

void CacheHeaders(OpenApiResponse& r, const std::string& hash, bool immutable) {
  r.headers.emplace_back("ETag", absl::StrCat("\"", hash, "\""));
  r.headers.emplace_back("Vary", "Accept");
  r.headers.emplace_back("Cache-Control",
                         immutable ? "public, immutable, max-age=31536000" : "no-cache, private");
}

}  // namespace

absl::StatusOr<OpenApiResponse> ServeOpenApi(const ResourceRegistry& registry,
                                             absl::string_view path, absl::string_view accept,
                                             absl::string_view hash,
                                             absl::string_view server_version) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  if (path != "/openapi/v2" && path != "/openapi/v3" && !absl::StartsWith(path, "/openapi/v3/")) {
    return PathNotFound();
  }
  const std::vector<std::string> types = AcceptedTypes(accept);
  ASSIGN_OR_RETURN(std::shared_ptr<const Snapshot> snapshot, Cache().Get(registry, server_version));
  OpenApiResponse r;
  if (path == "/openapi/v2") {
    // The first type the client lists that we serve wins.
    bool protobuf = false, found = types.empty();
    for (const std::string& t : types) {
      if (t == kOpenApiV2ProtobufType || t == kOpenApiV2ProtobufResponseType) {
        protobuf = true;
        found = true;
        break;
      }
      if (AcceptsJson({t})) {
        found = true;
        break;
      }
    }
    if (!found) {
      return kube::NotAcceptableError(
          absl::StrCat("only the following media types are accepted: application/json, ",
                       kOpenApiV2ProtobufType));
    }
    if (protobuf) {
      r.content_type = kOpenApiV2ProtobufResponseType;
      r.body = snapshot->v2_protobuf;
      CacheHeaders(r, Sha512Hex(r.body), false);
    } else {
      r.content_type = "application/json";
      r.body = snapshot->v2_json.body;
      CacheHeaders(r, snapshot->v2_json.hash, false);
    }
    return r;
  }
  if (!AcceptsJson(types)) return NotAcceptable(accept);
  r.content_type = "application/json";
  if (path == "/openapi/v3") {
    r.body = snapshot->index.body;
    CacheHeaders(r, snapshot->index.hash, false);
    return r;
  }
  absl::string_view gv_path = path.substr(std::strlen("/openapi/v3/"));
  auto it = snapshot->v3.find(std::string(gv_path));
  if (it == snapshot->v3.end()) return PathNotFound();
  const Document& doc = it->second;
  if (!hash.empty() && hash != doc.hash) {
    // A stale URL (the group/version changed since the client read the index): send the
    // client to the current one rather than serve content that does not match the hash.
    r.code = 301;
    r.body.clear();
    r.headers.emplace_back("Location", absl::StrCat(path, "?hash=", doc.hash));
    r.headers.emplace_back("Cache-Control", "no-cache, private");
    return r;
  }
  r.body = doc.body;
  CacheHeaders(r, doc.hash, !hash.empty());
  return r;
}

nlohmann::json BuildV3Index(const ResourceRegistry& registry) {
  std::vector<ResourcePtr> resources = registry.All();
  json paths = json::object();
  for (const auto& [path, gv] : GroupVersions(resources)) {
    const std::string body = Dump(V3Document(resources, gv.first, gv.second, "v1.32.0"));
    paths[path] = {
        {"serverRelativeURL", absl::StrCat("/openapi/v3/", path, "?hash=", Sha512Hex(body))}};
  }
  return {{"paths", std::move(paths)}};
}

absl::StatusOr<nlohmann::json> BuildV3Document(const ResourceRegistry& registry,
                                               absl::string_view group, absl::string_view version,
                                               absl::string_view server_version) {
  std::vector<ResourcePtr> resources = registry.All();
  if (GroupVersions(resources).count(GroupVersionPath(group, version)) == 0) {
    return PathNotFound();
  }
  return V3Document(resources, group, version, server_version);
}

nlohmann::json BuildV2Document(const ResourceRegistry& registry, absl::string_view server_version) {
  return V2Document(registry.All(), server_version);
}

}  // namespace ctrlhost::apiserver::openapi
