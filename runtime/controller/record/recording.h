// Recordings of reconciles: the file format that `ctrlhost run --record` (Recorder, recorder.h)
// writes and `ctrlhost replay` and the SDKs' testing helpers read. The messages are at the end of
// plugin.proto, which is the authority on fields; docs/recording.md is the prose version.
//
// A recording file is the 8 bytes "CTRLREC\n", a RecordingHeader, then ReconcileRecords, each
// message preceded by its length as a varint. One controller's files share a directory, named
// 00000001.ctrlrec, 00000002.ctrlrec, ... in the order they were written.
//
//   ASSIGN_OR_RETURN(std::vector<std::string> files, record::RecordingFiles(dir));
//   for (const std::string& file : files) {
//     ASSIGN_OR_RETURN(std::unique_ptr<record::RecordingReader> reader,
//                      record::RecordingReader::Open(file));
//     while (true) {
//       ASSIGN_OR_RETURN(std::optional<pluginpb::ReconcileRecord> r, reader->Next());
//       if (!r.has_value()) break;
//       ... reader->offset() is where *r starts ...
//     }
//   }
//
// Thread-compatible: a reader is used from one thread; the free functions are pure.
#ifndef CTRLHOST_RUNTIME_CONTROLLER_RECORD_RECORDING_H_
#define CTRLHOST_RUNTIME_CONTROLLER_RECORD_RECORDING_H_

#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/controller/reconcile.h"

namespace ctrlhost::controller::record {

// The first bytes of every recording file.
inline constexpr absl::string_view kMagic = absl::string_view("CTRLREC\n", 8);
// The format this code writes and the newest it reads (RecordingHeader.format).
inline constexpr uint32_t kFormat = 1;
// A record longer than this is refused as corrupt (a request and a response are 64 MiB at most).
inline constexpr uint64_t kMaxRecordBytes = uint64_t{256} << 20;
inline constexpr absl::string_view kFileSuffix = ".ctrlrec";

// "00000042.ctrlrec".
std::string FileName(uint64_t index);
// The index of a file named by FileName ("…/00000042.ctrlrec" → 42); nullopt for other names.
std::optional<uint64_t> FileIndex(absl::string_view path);

// The recording files in `dir`, in the order they were written (by index). NotFound when `dir`
// does not exist or holds none; FailedPrecondition when it is not a directory.
absl::StatusOr<std::vector<std::string>> RecordingFiles(const std::string& dir);

// The recording files of `controller` under `path`: a single file, a directory of files, or a
// directory with one subdirectory per controller (`path`/<controller>/). With `controller`
// empty, a directory of subdirectories must hold exactly one. Errors name what was found.
absl::StatusOr<std::vector<std::string>> FindRecording(const std::string& path,
                                                       const std::string& controller);

// A controller as a header records it, and back (the operator and plugin names are the header's).
pluginpb::RecordedController ToRecorded(const ControllerInfo& info);
ControllerInfo FromRecorded(const pluginpb::RecordingHeader& header);

// The framed bytes of one message (its length as a varint, then the message).
std::string Frame(const google::protobuf::MessageLite& message);
// The bytes a file starts with: the magic and the framed header.
std::string FileStart(const pluginpb::RecordingHeader& header);

// "sha256:<64 lowercase hex digits>" of `value`.
std::string SecretDigest(absl::string_view value);
// Replaces the values of every Secret's data and stringData in the call's object, children and
// related objects with their SecretDigest (a value that is not a string becomes "redacted"; one
// that is a digest already is kept, so that a controller that copies a Secret's value answers a
// replayed call as it answered the recorded one).
void RedactSecrets(pluginpb::ReconcileCall* call);
// False when RedactSecrets would leave `call` as it is (no object of it mentions Secret): a
// caller can skip copying the call. True does not mean it holds one.
bool MayHoldSecrets(const pluginpb::ReconcileCall& call);
// The same for an answer: desired Secrets, and patches of Secrets (owned ones, or the primary
// when `primary_is_secret`): a merge patch's data/stringData, a JSON patch's values under /data
// and /stringData.
void RedactSecrets(pluginpb::ReconcileResponse* response, bool primary_is_secret);
// Whether the controller's primary kind is the core Secret.
bool PrimaryIsSecret(const pluginpb::RecordedController& controller);

// Reads one recording file. Every error names the file and, for a record, its byte offset.
class RecordingReader {
 public:
  // Opens `path` and reads its magic and header. InvalidArgument for a file that is not a
  // recording or whose header is malformed; FailedPrecondition for a newer format.
  static absl::StatusOr<std::unique_ptr<RecordingReader>> Open(const std::string& path);

  const std::string& path() const { return path_; }
  const pluginpb::RecordingHeader& header() const { return header_; }
  // The next record, or nullopt at the end of the file. DataLoss for a record cut short (its
  // writer was killed mid-record), InvalidArgument for one that does not parse.
  absl::StatusOr<std::optional<pluginpb::ReconcileRecord>> Next();
  // Where the record Next returned last starts (its length prefix).
  uint64_t offset() const { return record_offset_; }

 private:
  explicit RecordingReader(std::string path) : path_(std::move(path)) {}
  // Reads the next framed message into `*bytes`; false at a clean end of file.
  absl::StatusOr<bool> ReadFrame(std::string* bytes, const char* what);

  const std::string path_;
  std::ifstream in_;
  uint64_t position_ = 0;       // bytes consumed so far
  uint64_t record_offset_ = 0;  // start of the last frame read
  pluginpb::RecordingHeader header_;
};

}  // namespace ctrlhost::controller::record

#endif  // CTRLHOST_RUNTIME_CONTROLLER_RECORD_RECORDING_H_
