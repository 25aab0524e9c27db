// Decoding of Kubernetes protobuf request bodies into JSON objects.
//
// kubectl and every typed client-go client (controller-runtime included) send built-in kinds as
// `Content-Type: application/vnd.kubernetes.protobuf` when they create or update them. The body
// is the 4 magic bytes "k8s\0" followed by a runtime.Unknown envelope whose typeMeta names the
// apiVersion/kind and whose raw field holds the typed message (k8s.io/api wire schema). The API
// server works on JSON objects, so DecodeKubeProtobuf turns such a body into exactly the object
// a JSON client would have sent for the same Go value.
//
// Guarantees:
//   - Nothing is dropped silently: a field number our schema subset does not declare (at any
//     depth), an unsupported kind or content encoding answers 415 UnsupportedMediaType naming
//     the upstream message and field, so the client knows to send JSON instead.
//   - Malformed bytes (missing magic, truncated or invalid protobuf, invalid UTF-8 in strings,
//     out-of-range times, unparsable embedded JSON) answer 400 BadRequest. No input crashes or
//     CHECK-fails the process.
//   - The output follows Kubernetes JSON: meta/v1 Time and MicroTime as RFC 3339 strings (zero
//     times left out), IntOrString as a number or string, Quantity as a string, FieldsV1 as the
//     JSON it holds, bytes (Secret.data, ConfigMap.binaryData) as base64, embedded Go fields
//     (Probe.handler, Volume.volumeSource) flattened into their parent, Go value fields with a
//     zero value left out, Go pointer fields kept even when zero (replicas: 0).
//
// Kinds: v1 Namespace, ConfigMap, Secret, ServiceAccount, Service, Event; apps/v1 Deployment;
// coordination.k8s.io/v1 Lease; events.k8s.io/v1 Event; DeleteOptions under any apiVersion.
//
// Example:
//   if (content_type == kProtobufContentType) {
//     ASSIGN_OR_RETURN(nlohmann::json object, DecodeKubeProtobuf(body));
//     // object["apiVersion"] == "v1", object["kind"] == "Namespace", ...
//   }
//
// Thread-safety: the functions are thread-safe (they share only immutable protobuf descriptors).

#ifndef CTRLHOST_RUNTIME_APISERVER_KUBEPROTO_KUBEPROTO_H_
#define CTRLHOST_RUNTIME_APISERVER_KUBEPROTO_KUBEPROTO_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace ctrlhost::apiserver {

// The media type of Kubernetes protobuf bodies (without parameters).
inline constexpr absl::string_view kProtobufContentType = "application/vnd.kubernetes.protobuf";

// Decodes a request body of type kProtobufContentType into the JSON object a JSON client would
// have sent, with "apiVersion" and "kind" taken from the envelope. Errors are kube API errors
// (runtime/kube/api_status.h): 400 for malformed bytes, 415 for anything this server's schema
// subset does not cover.
absl::StatusOr<nlohmann::json> DecodeKubeProtobuf(absl::string_view body);

}  // namespace ctrlhost::apiserver

#endif  // CTRLHOST_RUNTIME_APISERVER_KUBEPROTO_KUBEPROTO_H_
