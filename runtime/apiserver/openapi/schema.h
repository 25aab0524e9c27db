// Structural-schema handling of custom resources: pruning, defaulting and validation against a
// CRD version's openAPIV3Schema, with Kubernetes' field-validation modes.
//
//   ASSIGN_OR_RETURN(FieldValidation mode, ParseFieldValidation(query["fieldValidation"]));
//   ASSIGN_OR_RETURN(std::vector<std::string> warnings,
//                    PrepareCustomResource(*r->schema, r->group, r->kind, mode, object));
//   // `object` is pruned, defaulted and valid; send `warnings` as Warning headers.
//
// The steps, also usable alone:
// - Prune: removes every field the schema does not describe, except under
//   `x-kubernetes-preserve-unknown-fields: true` (or `additionalProperties: true`); apiVersion,
//   kind and metadata of the object, and of objects marked `x-kubernetes-embedded-resource`, are
//   kept. An untyped schema without properties keeps everything below it (structural schemas
//   only have those under preserve-unknown-fields or int-or-string). A null value of a described
//   field that is not `nullable` is removed too (it is not unknown, so not reported). Returns the
//   pruned paths ("spec.foo", "spec.items[1].bar").
// - ApplyDefaults: fills absent (or null, when not nullable) fields that have a `default`,
//   top-down, so defaults inside a defaulted object apply as well.
// - Validate: type (object, array, string, integer, number, boolean; `nullable`;
//   `x-kubernetes-int-or-string`), required, enum, minimum/maximum (exclusive), multipleOf,
//   minLength/maxLength (in characters), pattern (ECMAScript; values over 4096 bytes are
//   refused rather than matched, since std::regex recurses per character), minItems/maxItems,
//   uniqueItems, minProperties/maxProperties, additionalProperties, formats int32, int64,
//   date-time, date, byte, uuid, ipv4, allOf/anyOf/oneOf/not, and x-kubernetes-list-type
//   set/map uniqueness. Causes use apimachinery's messages, e.g.
//   `spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal
//   to 0`.
// The object's metadata is not validated here (the server's ObjectMeta checks do that).
//
// A malformed schema never crashes and never rejects by itself: keywords of the wrong type are
// ignored, and schemas nested deeper than 100 levels stop being enforced below that depth.
//
// Thread-safe: pure functions.
#ifndef CTRLHOST_RUNTIME_APISERVER_OPENAPI_SCHEMA_H_
#define CTRLHOST_RUNTIME_APISERVER_OPENAPI_SCHEMA_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "runtime/kube/api_status.h"

namespace ctrlhost::apiserver::openapi {

// The `fieldValidation` query parameter.
enum class FieldValidation {
  kIgnore,  // drop unknown fields silently
  kWarn,    // drop them and warn (the server default)
  kStrict,  // refuse the request (400) when there are any
};

// "" -> kWarn; "Ignore", "Warn", "Strict"; anything else is a 400 BadRequest with the real
// server's message.
absl::StatusOr<FieldValidation> ParseFieldValidation(absl::string_view value);

// Removes unknown fields from `object` (a whole custom resource) and returns their paths.
std::vector<std::string> Prune(const nlohmann::json& schema, nlohmann::json& object);

// Sets the schema's defaults on `object` (a whole custom resource).
void ApplyDefaults(const nlohmann::json& schema, nlohmann::json& object);

// The causes `object` (a whole custom resource) violates; empty when valid.
std::vector<kube::StatusCause> Validate(const nlohmann::json& schema, const nlohmann::json& object);

// Prune + ApplyDefaults + Validate with `mode`:
// - unknown fields with kStrict: 400 BadRequest
//   `strict decoding error: unknown field "spec.foo", unknown field "spec.bar"`;
// - invalid: 422 Invalid `<Kind>.<group> "<name>" is invalid: ...` with one cause per problem.
// Returns the warnings to send (`unknown field "spec.foo"` for kWarn, none otherwise).
// A null `schema` (a CRD version without one) accepts anything.
absl::StatusOr<std::vector<std::string>> PrepareCustomResource(const nlohmann::json& schema,
                                                               absl::string_view group,
                                                               absl::string_view kind,
                                                               FieldValidation mode,
                                                               nlohmann::json& object);

}  // namespace ctrlhost::apiserver::openapi

#endif  // CTRLHOST_RUNTIME_APISERVER_OPENAPI_SCHEMA_H_
