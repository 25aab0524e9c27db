#include "runtime/apiserver/list_tokens.h"

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/kube/api_status.h"

namespace ctrlhost::apiserver {

std::string EncodeContinue(int64_t revision, const std::string& key) {
  const nlohmann::json token = {{"v", "meta.k8s.io/v1"}, {"rv", revision}, {"key", key}};
  return absl::WebSafeBase64Escape(
      token.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

absl::StatusOr<ContinueToken> DecodeContinue(const std::string& token) {
  std::string raw;
  if (!absl::WebSafeBase64Unescape(token, &raw) && !absl::Base64Unescape(token, &raw)) {
    return kube::BadRequestError("invalid continue token: not base64");
  }
  nlohmann::json j = nlohmann::json::parse(raw, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("rv") || !j["rv"].is_number_integer() ||
      !j.contains("key") || !j["key"].is_string()) {
    return kube::BadRequestError("invalid continue token");
  }
  return ContinueToken{j["rv"].get<int64_t>(), j["key"].get<std::string>()};
}

absl::StatusOr<int64_t> ParseResourceVersion(absl::string_view rv) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(rv, &v) || v < 0) {
    return kube::BadRequestError(absl::StrCat("invalid resource version \"", rv, "\""));
  }
  return v;
}

}  // namespace ctrlhost::apiserver
