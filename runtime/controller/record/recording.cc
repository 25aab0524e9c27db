#include "runtime/controller/record/recording.h"

#include <openssl/evp.h>

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "google/protobuf/io/coded_stream.h"
#include "nlohmann/json.hpp"

namespace ctrlhost::controller::record {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool IsSecret(const json& object) {
  if (!object.is_object()) return false;
  auto api_version = object.find("apiVersion");
  auto kind = object.find("kind");
  return api_version != object.end() && kind != object.end() && *api_version == "v1" &&
         *kind == "Secret";
}

// Whether `value` is a digest already: a replayed call carries digests, and a controller that
// copies a Secret's value into its answer must answer as it did when recorded.
bool IsDigest(const std::string& value) {
  return value.size() == 7 + 64 && absl::StartsWith(value, "sha256:") &&
         std::all_of(value.begin() + 7, value.end(),
                     [](char c) { return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f'); });
}

// The digest that replaces `value` (a Secret's data or stringData value).
json Digested(const json& value) {
  if (!value.is_string()) return "redacted";
  const std::string& text = value.get_ref<const std::string&>();
  return IsDigest(text) ? text : SecretDigest(text);
}

// Replaces the values of the object `values` (a Secret's data or stringData) by their digests.
void RedactValues(json& values) {
  if (!values.is_object()) return;
  for (auto& [key, value] : values.items()) value = Digested(value);
}

void RedactMembers(json& object) {
  for (const char* member : {"data", "stringData"}) {
    auto it = object.find(member);
    if (it != object.end()) RedactValues(*it);
  }
}

// Whether `bytes` could be a Secret's JSON: only text that mentions Secret is parsed.
bool MayBeSecret(absl::string_view bytes) { return absl::StrContains(bytes, "Secret"); }

// `bytes`, if it is a Secret's JSON, with its values digested. Cheap for everything else.
void RedactObjectBytes(std::string* bytes) {
  if (!MayBeSecret(*bytes)) return;
  json object = json::parse(*bytes, nullptr, /*allow_exceptions=*/false);
  if (!IsSecret(object)) return;
  RedactMembers(object);
  *bytes = object.dump(-1, ' ', false, json::error_handler_t::replace);
}

void RedactPatch(pluginpb::Patch* patch) {
  json body = json::parse(patch->patch(), nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return;
  if (patch->type() == pluginpb::PATCH_TYPE_MERGE_PATCH && body.is_object()) {
    RedactMembers(body);
  } else if (patch->type() == pluginpb::PATCH_TYPE_JSON_PATCH && body.is_array()) {
    for (json& op : body) {
      if (!op.is_object() || !op.contains("path") || !op["path"].is_string()) continue;
      const std::string& path = op["path"].get_ref<const std::string&>();
      auto value = op.find("value");
      if (value == op.end()) continue;
      if (path == "/data" || path == "/stringData") {
        RedactValues(*value);
      } else if (absl::StartsWith(path, "/data/") || absl::StartsWith(path, "/stringData/")) {
        *value = Digested(*value);
      }
    }
  } else {
    return;
  }
  patch->set_patch(body.dump(-1, ' ', false, json::error_handler_t::replace));
}

pluginpb::RecordedKind ToRecordedKind(const kube::ResourceMapping& m) {
  pluginpb::RecordedKind k;
  k.set_group(m.group);
  k.set_version(m.version);
  k.set_resource(m.resource);
  k.set_kind(m.kind);
  k.set_namespaced(m.namespaced);
  k.set_has_status(m.has_status);
  return k;
}

kube::ResourceMapping FromRecordedKind(const pluginpb::RecordedKind& k) {
  kube::ResourceMapping m;
  m.group = k.group();
  m.version = k.version();
  m.resource = k.resource();
  m.kind = k.kind();
  m.namespaced = k.namespaced();
  m.has_status = k.has_status();
  return m;
}

std::vector<std::string> Subdirectories(const std::string& path) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(path, ec)) {
    if (entry.is_directory(ec)) names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

std::string FileName(uint64_t index) {
  return absl::StrFormat("%08d%s", index, std::string(kFileSuffix));
}

std::optional<uint64_t> FileIndex(absl::string_view path) {
  const size_t slash = path.rfind('/');
  absl::string_view name = slash == absl::string_view::npos ? path : path.substr(slash + 1);
  if (!absl::ConsumeSuffix(&name, kFileSuffix) || name.size() < 8) return std::nullopt;
  uint64_t index = 0;
  if (!std::all_of(name.begin(), name.end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(name, &index)) {
    return std::nullopt;
  }
  return index;
}

absl::StatusOr<std::vector<std::string>> RecordingFiles(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return absl::NotFoundError(absl::StrCat(dir, ": no such directory"));
  if (!fs::is_directory(dir, ec)) {
    return absl::FailedPreconditionError(absl::StrCat(dir, ": not a directory"));
  }
  std::vector<std::pair<uint64_t, std::string>> found;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::string path = entry.path().string();
    if (std::optional<uint64_t> index = FileIndex(path); index.has_value()) {
      found.emplace_back(*index, path);
    }
  }
  if (ec) return absl::FailedPreconditionError(absl::StrCat(dir, ": ", ec.message()));
  if (found.empty()) {
    return absl::NotFoundError(
        absl::StrCat(dir, ": holds no recording files (*", kFileSuffix, ")"));
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> files;
  for (auto& [index, path] : found) files.push_back(std::move(path));
  return files;
}

absl::StatusOr<std::vector<std::string>> FindRecording(const std::string& path,
                                                       const std::string& controller) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return std::vector<std::string>{path};
  absl::StatusOr<std::vector<std::string>> direct = RecordingFiles(path);
  if (direct.ok() || !absl::IsNotFound(direct.status()) || !fs::is_directory(path, ec)) {
    return direct;
  }
  std::vector<std::string> controllers;
  for (const std::string& name : Subdirectories(path)) {
    if (RecordingFiles(absl::StrCat(path, "/", name)).ok()) controllers.push_back(name);
  }
  const std::string found =
      controllers.empty() ? "none" : absl::StrCat("found: ", absl::StrJoin(controllers, ", "));
  if (!controller.empty()) {
    if (std::find(controllers.begin(), controllers.end(), controller) == controllers.end()) {
      return absl::NotFoundError(
          absl::StrCat(path, ": holds no recording of controller ", controller, " (", found, ")"));
    }
    return RecordingFiles(absl::StrCat(path, "/", controller));
  }
  if (controllers.size() != 1) {
    return controllers.empty()
               ? absl::NotFoundError(absl::StrCat(path, ": holds no recording files (*",
                                                  kFileSuffix, "), directly or per controller"))
               : absl::FailedPreconditionError(
                     absl::StrCat(path, ": holds recordings of several controllers (", found,
                                  "): name one with --controller"));
  }
  return RecordingFiles(absl::StrCat(path, "/", controllers[0]));
}

pluginpb::RecordedController ToRecorded(const ControllerInfo& info) {
  pluginpb::RecordedController c;
  c.set_name(info.name);
  *c.mutable_primary() = ToRecordedKind(info.primary);
  for (const OwnedResource& owned : info.owns) {
    pluginpb::RecordedKind* k = c.add_owns();
    *k = ToRecordedKind(owned.mapping);
    k->set_delete_absent(owned.delete_absent);
  }
  c.set_finalizer(info.finalizer);
  c.set_field_manager(info.field_manager);
  c.set_host_status(info.host_status);
  return c;
}

ControllerInfo FromRecorded(const pluginpb::RecordingHeader& header) {
  const pluginpb::RecordedController& c = header.controller();
  ControllerInfo info;
  info.operator_name = header.operator_();
  info.plugin = header.plugin();
  info.name = c.name();
  info.primary = FromRecordedKind(c.primary());
  for (const pluginpb::RecordedKind& k : c.owns()) {
    info.owns.push_back({FromRecordedKind(k), k.delete_absent()});
  }
  info.finalizer = c.finalizer();
  info.field_manager = c.field_manager();
  info.host_status = c.host_status();
  return info;
}

std::string Frame(const google::protobuf::MessageLite& message) {
  const size_t size = message.ByteSizeLong();
  std::string out;
  out.resize(google::protobuf::io::CodedOutputStream::VarintSize64(size) + size);
  uint8_t* p = reinterpret_cast<uint8_t*>(out.data());
  p = google::protobuf::io::CodedOutputStream::WriteVarint64ToArray(size, p);
  message.SerializeWithCachedSizesToArray(p);
  return out;
}

std::string FileStart(const pluginpb::RecordingHeader& header) {
  return absl::StrCat(kMagic, Frame(header));
}

std::string SecretDigest(absl::string_view value) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(value.data(), value.size(), digest, &size, EVP_sha256(), nullptr) != 1) {
    return "redacted";
  }
  std::string out = "sha256:";
  for (unsigned int i = 0; i < size; ++i) absl::StrAppendFormat(&out, "%02x", digest[i]);
  return out;
}

bool MayHoldSecrets(const pluginpb::ReconcileCall& call) {
  if (MayBeSecret(call.object())) return true;
  for (const pluginpb::RawObject& child : call.children()) {
    if (MayBeSecret(child.object())) return true;
  }
  for (const pluginpb::RawObject& related : call.related_objects()) {
    if (MayBeSecret(related.object())) return true;
  }
  return false;
}

void RedactSecrets(pluginpb::ReconcileCall* call) {
  RedactObjectBytes(call->mutable_object());
  for (pluginpb::RawObject& child : *call->mutable_children()) {
    RedactObjectBytes(child.mutable_object());
  }
  for (pluginpb::RawObject& related : *call->mutable_related_objects()) {
    RedactObjectBytes(related.mutable_object());
  }
}

void RedactSecrets(pluginpb::ReconcileResponse* response, bool primary_is_secret) {
  for (std::string& desired : *response->mutable_desired_objects()) RedactObjectBytes(&desired);
  for (pluginpb::Patch& patch : *response->mutable_patches()) {
    const bool secret = patch.target() == pluginpb::PATCH_TARGET_OWNED
                            ? patch.api_version() == "v1" && patch.kind() == "Secret"
                            : patch.target() == pluginpb::PATCH_TARGET_PRIMARY && primary_is_secret;
    if (secret) RedactPatch(&patch);
  }
}

bool PrimaryIsSecret(const pluginpb::RecordedController& controller) {
  return controller.primary().group().empty() && controller.primary().kind() == "Secret";
}

absl::StatusOr<std::unique_ptr<RecordingReader>> RecordingReader::Open(const std::string& path) {
  std::unique_ptr<RecordingReader> reader(new RecordingReader(path));
  reader->in_.open(path, std::ios::binary);
  if (!reader->in_) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  char magic[kMagic.size()];
  reader->in_.read(magic, sizeof(magic));
  if (reader->in_.gcount() != static_cast<std::streamsize>(sizeof(magic)) ||
      absl::string_view(magic, sizeof(magic)) != kMagic) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a ctrlhost recording (no CTRLREC magic at offset 0)"));
  }
  reader->position_ = sizeof(magic);
  std::string bytes;
  absl::StatusOr<bool> read = reader->ReadFrame(&bytes, "header");
  if (!read.ok()) return read.status();
  if (!*read) {
    return absl::DataLossError(absl::StrCat(path, ": ends before its header at offset ",
                                            reader->record_offset_,
                                            ": the recording was interrupted"));
  }
  if (!reader->header_.ParseFromString(bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": the header at offset ",
                                                   reader->record_offset_,
                                                   " is not a valid RecordingHeader"));
  }
  if (reader->header_.format() > kFormat) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": recording format ", reader->header_.format(),
                     " is newer than this reader (it reads format ", kFormat, ")"));
  }
  return reader;
}

absl::StatusOr<bool> RecordingReader::ReadFrame(std::string* bytes, const char* what) {
  record_offset_ = position_;
  uint64_t size = 0;
  int shift = 0;
  size_t prefix = 0;
  while (true) {
    const int c = in_.get();
    if (c == std::char_traits<char>::eof()) {
      if (prefix == 0) return false;  // a clean end
      return absl::DataLossError(absl::StrCat(path_, ": ", what, " at offset ", record_offset_,
                                              " is cut short (", prefix, " of ", prefix + 1,
                                              " bytes): the recording was interrupted"));
    }
    ++prefix;
    ++position_;
    size |= static_cast<uint64_t>(c & 0x7f) << shift;
    if ((c & 0x80) == 0) break;
    shift += 7;
    if (prefix == 10) {
      return absl::InvalidArgumentError(absl::StrCat(path_, ": ", what, " at offset ",
                                                     record_offset_, " has a malformed length"));
    }
  }
  if (size > kMaxRecordBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": ", what, " at offset ", record_offset_, " claims ", size,
                     " bytes, more than the limit of ", kMaxRecordBytes, ": the file is corrupt"));
  }
  bytes->resize(size);
  in_.read(bytes->data(), static_cast<std::streamsize>(size));
  const uint64_t got = static_cast<uint64_t>(in_.gcount());
  position_ += got;
  if (got != size) {
    return absl::DataLossError(absl::StrCat(path_, ": ", what, " at offset ", record_offset_,
                                            " is cut short (", prefix + got, " of ", prefix + size,
                                            " bytes): the recording was interrupted"));
  }
  return true;
}

absl::StatusOr<std::optional<pluginpb::ReconcileRecord>> RecordingReader::Next() {
  std::string bytes;
  absl::StatusOr<bool> read = ReadFrame(&bytes, "record");
  if (!read.ok()) return read.status();
  if (!*read) return std::nullopt;
  pluginpb::ReconcileRecord record;
  if (!record.ParseFromString(bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": record at offset ", record_offset_,
                                                   " is not a valid ReconcileRecord"));
  }
  return record;
}

}  // namespace ctrlhost::controller::record
