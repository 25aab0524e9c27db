#include "runtime/apiserver/kubeproto/kubeproto.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/protobuf/unknown_field_set.h"
#include "runtime/apiserver/body_limits.h"
#include "runtime/apiserver/kubeproto/apps_v1.pb.h"
#include "runtime/apiserver/kubeproto/coordination_v1.pb.h"
#include "runtime/apiserver/kubeproto/core_v1.pb.h"
#include "runtime/apiserver/kubeproto/events_v1.pb.h"
#include "runtime/apiserver/kubeproto/intstr.pb.h"
#include "runtime/apiserver/kubeproto/meta_v1.pb.h"
#include "runtime/apiserver/kubeproto/options.pb.h"
#include "runtime/apiserver/kubeproto/resource.pb.h"
#include "runtime/apiserver/kubeproto/runtime.pb.h"
#include "runtime/common/status_macros.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::apiserver {
namespace {

namespace pb = ::google::protobuf;
namespace kp = ::ctrlhost::kubeproto;

using Json = nlohmann::json;

constexpr absl::string_view kMagic("k8s\0", 4);

// Go's time.Time marshals years 1..9999 only (RFC 3339); Unix seconds of 0001-01-01T00:00:00Z
// and 9999-12-31T23:59:59Z.
constexpr int64_t kMinSeconds = -62135596800;
constexpr int64_t kMaxSeconds = 253402300799;

constexpr absl::string_view kSendJson = "; send application/json";

// The upstream full name of one of our messages (k8s.io.api.core.v1.PodSpec), for errors.
std::string UpstreamName(const pb::Descriptor* d) {
  const std::string& package = d->file()->options().GetExtension(kp::upstream_package);
  if (package.empty()) return d->full_name();
  return absl::StrCat(package, ".", d->name());
}

// The prototype of the message for an envelope's apiVersion and kind, or null.
const pb::Message* PrototypeFor(absl::string_view api_version, absl::string_view kind) {
  // Built once, read-only afterwards (function-local static initialization is thread-safe).
  static const auto* const kKinds = new absl::flat_hash_map<std::string, const pb::Message*>{
      {"v1/Namespace", &kp::core::v1::Namespace::default_instance()},
      {"v1/ConfigMap", &kp::core::v1::ConfigMap::default_instance()},
      {"v1/Secret", &kp::core::v1::Secret::default_instance()},
      {"v1/ServiceAccount", &kp::core::v1::ServiceAccount::default_instance()},
      {"v1/Service", &kp::core::v1::Service::default_instance()},
      {"v1/Event", &kp::core::v1::Event::default_instance()},
      {"apps/v1/Deployment", &kp::apps::v1::Deployment::default_instance()},
      {"coordination.k8s.io/v1/Lease", &kp::coordination::v1::Lease::default_instance()},
      {"events.k8s.io/v1/Event", &kp::events::v1::Event::default_instance()},
  };
  // Kubernetes registers DeleteOptions in every group version; typed clients send it as the
  // body of DELETE under their own apiVersion.
  if (kind == "DeleteOptions") return &kp::meta::v1::DeleteOptions::default_instance();
  auto it = kKinds->find(absl::StrCat(api_version, "/", kind));
  return it == kKinds->end() ? nullptr : it->second;
}

class Converter {
 public:
  // Converts a message to its JSON form; nullopt means "leave the field out" (a zero time).
  absl::StatusOr<std::optional<Json>> Convert(const pb::Message& m) {
    const pb::Descriptor* d = m.GetDescriptor();
    const pb::Reflection* r = m.GetReflection();
    RETURN_IF_ERROR(CheckUnknownFields(m));
    if (d == kp::meta::v1::Time::descriptor()) return ConvertTime(m, /*micro=*/false);
    if (d == kp::meta::v1::MicroTime::descriptor()) return ConvertTime(m, /*micro=*/true);
    if (d == kp::intstr::IntOrString::descriptor()) return ConvertIntOrString(m);
    if (d == kp::resource::Quantity::descriptor()) {
      std::string s = r->GetString(m, d->FindFieldByNumber(1));
      if (!IsValidUtf8(s)) return kube::BadRequestError("a protobuf quantity is not valid UTF-8");
      // Go's zero Quantity marshals as "0".
      return Json(s.empty() ? "0" : s);
    }
    if (d == kp::meta::v1::FieldsV1::descriptor()) return ConvertEmbeddedJson(m);

    Json out = Json::object();
    std::vector<const pb::FieldDescriptor*> fields;
    r->ListFields(m, &fields);
    for (const pb::FieldDescriptor* f : fields) {
      if (f->is_map()) {
        ASSIGN_OR_RETURN(Json map, ConvertMap(m, f));
        out[f->name()] = std::move(map);
      } else if (f->is_repeated()) {
        Json array = Json::array();
        const int n = r->FieldSize(m, f);
        for (int i = 0; i < n; ++i) {
          if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
            ASSIGN_OR_RETURN(std::optional<Json> item, Convert(r->GetRepeatedMessage(m, f, i)));
            array.push_back(item.has_value() ? std::move(*item) : Json(nullptr));
          } else {
            ASSIGN_OR_RETURN(Json item, Scalar(m, f, i));
            array.push_back(std::move(item));
          }
        }
        out[f->name()] = std::move(array);
      } else if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
        ASSIGN_OR_RETURN(std::optional<Json> value, Convert(r->GetMessage(m, f)));
        if (!value.has_value()) continue;
        if (f->options().GetExtension(kp::inline_)) {
          // An embedded Go struct: its fields belong to the parent object.
          for (auto& [key, v] : value->items()) out[key] = std::move(v);
        } else {
          out[f->name()] = std::move(*value);
        }
      } else {
        // Go value fields are always on the wire; their zero value means unset.
        if (!f->options().GetExtension(kp::explicit_zero) && IsZero(m, f)) continue;
        ASSIGN_OR_RETURN(Json value, Scalar(m, f, -1));
        out[f->name()] = std::move(value);
      }
    }
    return out;
  }

  // 415 for a field number the message does not declare, 400 for a declared one that arrived
  // with another wire type (protobuf keeps both as unknown fields).
  static absl::Status CheckUnknownFields(const pb::Message& m) {
    const pb::UnknownFieldSet& unknown = m.GetReflection()->GetUnknownFields(m);
    if (unknown.empty()) return absl::OkStatus();
    const int number = unknown.field(0).number();
    const pb::Descriptor* d = m.GetDescriptor();
    if (d->FindFieldByNumber(number) != nullptr) {
      // A declared field with another wire type than its declaration: corrupt, not newer.
      return kube::BadRequestError(absl::StrCat("protobuf field ", number, " (",
                                                d->FindFieldByNumber(number)->name(), ") of ",
                                                UpstreamName(d), " has the wrong wire type"));
    }
    return kube::UnsupportedMediaTypeError(
        absl::StrCat("protobuf field ", number, " of ", UpstreamName(d),
                     " is not supported by this server", kSendJson));
  }

 private:
  static bool IsZero(const pb::Message& m, const pb::FieldDescriptor* f) {
    const pb::Reflection* r = m.GetReflection();
    switch (f->cpp_type()) {
      case pb::FieldDescriptor::CPPTYPE_INT32:
        return r->GetInt32(m, f) == 0;
      case pb::FieldDescriptor::CPPTYPE_INT64:
        return r->GetInt64(m, f) == 0;
      case pb::FieldDescriptor::CPPTYPE_UINT32:
        return r->GetUInt32(m, f) == 0;
      case pb::FieldDescriptor::CPPTYPE_UINT64:
        return r->GetUInt64(m, f) == 0;
      case pb::FieldDescriptor::CPPTYPE_DOUBLE:
        return r->GetDouble(m, f) == 0;
      case pb::FieldDescriptor::CPPTYPE_FLOAT:
        return r->GetFloat(m, f) == 0;
      case pb::FieldDescriptor::CPPTYPE_BOOL:
        return !r->GetBool(m, f);
      case pb::FieldDescriptor::CPPTYPE_STRING:
        return r->GetStringReference(m, f, nullptr).empty();
      default:
        return false;
    }
  }

  // A scalar field's value (index < 0: singular).
  absl::StatusOr<Json> Scalar(const pb::Message& m, const pb::FieldDescriptor* f, int index) {
    const pb::Reflection* r = m.GetReflection();
    const bool rep = index >= 0;
    switch (f->cpp_type()) {
      case pb::FieldDescriptor::CPPTYPE_INT32:
        return Json(rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f));
      case pb::FieldDescriptor::CPPTYPE_INT64:
        return Json(rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f));
      case pb::FieldDescriptor::CPPTYPE_UINT32:
        return Json(rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f));
      case pb::FieldDescriptor::CPPTYPE_UINT64:
        return Json(rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f));
      case pb::FieldDescriptor::CPPTYPE_DOUBLE:
        return Json(rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f));
      case pb::FieldDescriptor::CPPTYPE_FLOAT:
        return Json(rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f));
      case pb::FieldDescriptor::CPPTYPE_BOOL:
        return Json(rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f));
      case pb::FieldDescriptor::CPPTYPE_STRING: {
        std::string s = rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f);
        if (f->type() == pb::FieldDescriptor::TYPE_BYTES) return Json(absl::Base64Escape(s));
        if (!IsValidUtf8(s)) return InvalidUtf8(m, f);
        return Json(std::move(s));
      }
      default:
        // Our schema declares no enums; refuse rather than guess if one is ever added.
        return kube::UnsupportedMediaTypeError(
            absl::StrCat("protobuf field ", f->name(), " of ", UpstreamName(m.GetDescriptor()),
                         " has a type this server does not decode", kSendJson));
    }
  }

  absl::Status InvalidUtf8(const pb::Message& m, const pb::FieldDescriptor* f) {
    return kube::BadRequestError(absl::StrCat("protobuf field ", f->name(), " of ",
                                              UpstreamName(m.GetDescriptor()),
                                              " is not valid UTF-8"));
  }

  absl::StatusOr<Json> ConvertMap(const pb::Message& m, const pb::FieldDescriptor* f) {
    const pb::Reflection* r = m.GetReflection();
    const pb::FieldDescriptor* key_field = f->message_type()->FindFieldByNumber(1);
    const pb::FieldDescriptor* value_field = f->message_type()->FindFieldByNumber(2);
    Json out = Json::object();
    const int n = r->FieldSize(m, f);
    for (int i = 0; i < n; ++i) {
      const pb::Message& entry = r->GetRepeatedMessage(m, f, i);
      ASSIGN_OR_RETURN(Json key, Scalar(entry, key_field, -1));
      if (!key.is_string()) {
        return kube::UnsupportedMediaTypeError(absl::StrCat("protobuf map ", f->name(), " of ",
                                                            UpstreamName(m.GetDescriptor()),
                                                            " has non-string keys", kSendJson));
      }
      Json value;
      if (value_field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
        ASSIGN_OR_RETURN(std::optional<Json> v,
                         Convert(entry.GetReflection()->GetMessage(entry, value_field)));
        value = v.has_value() ? std::move(*v) : Json(nullptr);
      } else {
        ASSIGN_OR_RETURN(value, Scalar(entry, value_field, -1));
      }
      out[key.get<std::string>()] = std::move(value);
    }
    return out;
  }

  // meta/v1 Time ({seconds, nanos}) as Go's Time.MarshalJSON (RFC 3339, seconds) and
  // MicroTime.MarshalJSON (RFC 3339 with microseconds), both in UTC. Go decodes an empty
  // message or {0, 0} as the zero time, which JSON writes as null: we leave it out.
  absl::StatusOr<std::optional<Json>> ConvertTime(const pb::Message& m, bool micro) {
    const pb::Descriptor* d = m.GetDescriptor();
    const pb::Reflection* r = m.GetReflection();
    const int64_t seconds = r->GetInt64(m, d->FindFieldByNumber(1));
    const int32_t nanos = r->GetInt32(m, d->FindFieldByNumber(2));
    if (nanos == 0 && (seconds == 0 || seconds == kMinSeconds)) return std::nullopt;
    if (seconds < kMinSeconds || seconds > kMaxSeconds || nanos < 0 || nanos > 999999999) {
      return kube::BadRequestError(absl::StrCat("a protobuf ", UpstreamName(d),
                                                " is out of range: ", seconds, "s ", nanos, "ns"));
    }
    const absl::Time t = absl::FromUnixSeconds(seconds) + absl::Nanoseconds(nanos);
    return Json(absl::FormatTime(micro ? "%Y-%m-%dT%H:%M:%E6SZ" : "%Y-%m-%dT%H:%M:%SZ", t,
                                 absl::UTCTimeZone()));
  }

  // intstr.IntOrString {type, intVal, strVal}: type 0 is the number, 1 the string.
  absl::StatusOr<std::optional<Json>> ConvertIntOrString(const pb::Message& m) {
    const auto* v = pb::DynamicCastToGenerated<kp::intstr::IntOrString>(&m);
    if (v == nullptr) return kube::InternalError("IntOrString is not the generated message");
    if (v->type() == 0) return Json(v->intval());
    if (v->type() == 1) {
      if (!IsValidUtf8(v->strval())) {
        return kube::BadRequestError("a protobuf IntOrString string is not valid UTF-8");
      }
      return Json(v->strval());
    }
    return kube::BadRequestError(
        absl::StrCat("a protobuf IntOrString has the unknown type ", v->type()));
  }

  // meta/v1 FieldsV1 holds its JSON text in Raw; JSON clients send that text as the value.
  absl::StatusOr<std::optional<Json>> ConvertEmbeddedJson(const pb::Message& m) {
    const auto* v = pb::DynamicCastToGenerated<kp::meta::v1::FieldsV1>(&m);
    if (v == nullptr) return kube::InternalError("FieldsV1 is not the generated message");
    const std::string& raw = v->raw();
    if (raw.empty()) return Json::object();
    // The server later serializes objects recursively (see body_limits.h).
    RETURN_IF_ERROR(CheckJsonTextNesting(raw, "a protobuf FieldsV1"));
    Json parsed = Json::parse(raw.begin(), raw.end(), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) {
      return kube::BadRequestError("a protobuf FieldsV1 does not hold valid JSON");
    }
    return parsed;
  }
};

}  // namespace

absl::StatusOr<nlohmann::json> DecodeKubeProtobuf(absl::string_view body) {
  if (body.size() < kMagic.size() || body.substr(0, kMagic.size()) != kMagic) {
    return kube::BadRequestError(
        "the protobuf request body does not start with the Kubernetes magic bytes \"k8s\\x00\"");
  }
  body.remove_prefix(kMagic.size());
  if (body.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return kube::RequestEntityTooLargeError("the protobuf request body is larger than 2 GiB");
  }
  kp::runtime::Unknown envelope;
  if (!envelope.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
    return kube::BadRequestError(
        "the protobuf request body is not a valid runtime.Unknown envelope (truncated or "
        "malformed)");
  }
  Converter converter;
  // The envelope itself must hold nothing we would ignore.
  RETURN_IF_ERROR(Converter::CheckUnknownFields(envelope));
  RETURN_IF_ERROR(Converter::CheckUnknownFields(envelope.typemeta()));
  if (!envelope.contentencoding().empty()) {
    return kube::UnsupportedMediaTypeError(
        absl::StrCat("protobuf content encoding \"", absl::CHexEscape(envelope.contentencoding()),
                     "\" is not supported by this server", kSendJson));
  }
  if (!envelope.contenttype().empty() && envelope.contenttype() != kProtobufContentType) {
    return kube::UnsupportedMediaTypeError(
        absl::StrCat("protobuf envelope content type \"", absl::CHexEscape(envelope.contenttype()),
                     "\" is not supported by this server", kSendJson));
  }
  const std::string& api_version = envelope.typemeta().apiversion();
  const std::string& kind = envelope.typemeta().kind();
  if (api_version.empty() || kind.empty()) {
    return kube::BadRequestError("the protobuf request body does not name its apiVersion and kind");
  }
  if (!IsValidUtf8(api_version) || !IsValidUtf8(kind)) {
    return kube::BadRequestError("the protobuf apiVersion or kind is not valid UTF-8");
  }
  const pb::Message* prototype = PrototypeFor(api_version, kind);
  if (prototype == nullptr) {
    return kube::UnsupportedMediaTypeError(absl::StrCat("protobuf bodies of ", api_version, " ",
                                                        kind, " are not supported by this server",
                                                        kSendJson));
  }
  std::unique_ptr<pb::Message> message(prototype->New());
  if (!message->ParseFromString(envelope.raw())) {
    return kube::BadRequestError(absl::StrCat("the protobuf ", api_version, " ", kind,
                                              " in the request body is truncated or malformed"));
  }
  ASSIGN_OR_RETURN(std::optional<Json> object, converter.Convert(*message));
  if (!object.has_value() || !object->is_object()) {
    return kube::InternalError("a protobuf object did not convert to a JSON object");
  }
  (*object)["apiVersion"] = api_version;
  (*object)["kind"] = kind;
  return std::move(*object);
}

}  // namespace ctrlhost::apiserver
