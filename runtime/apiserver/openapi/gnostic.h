// Swagger 2.0 (JSON) to gnostic's OpenAPIv2 `Document` protobuf message, the form kubectl
// asks for with `Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf`.
//
//   ASSIGN_OR_RETURN(std::string bytes, openapi::SwaggerToGnostic(swagger_json));
//
// The encoder writes the wire format by hand, with the field numbers of
// github.com/google/gnostic openapiv2/OpenAPIv2.proto (package openapi.v2). It covers what
// the Swagger documents of this package contain: info, paths with get/put/post/delete/patch
// operations, query/path/body parameters, responses, definitions (schemas with every
// validation keyword), security definitions of type apiKey, and vendor extensions (`x-*`,
// encoded as gnostic does: an Any whose `yaml` holds the value; JSON is valid YAML).
// Unknown keys are skipped.
//
// Thread-safe: pure function.
#ifndef CTRLHOST_RUNTIME_APISERVER_OPENAPI_GNOSTIC_H_
#define CTRLHOST_RUNTIME_APISERVER_OPENAPI_GNOSTIC_H_

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace ctrlhost::apiserver::openapi {

// InvalidArgument when `swagger` is not an object or nests schemas deeper than 200 levels.
absl::StatusOr<std::string> SwaggerToGnostic(const nlohmann::json& swagger);

}  // namespace ctrlhost::apiserver::openapi

#endif  // CTRLHOST_RUNTIME_APISERVER_OPENAPI_GNOSTIC_H_
