// Recording files, as `ctrlhost run --record` writes them, for the replay helpers (replay.h).
// The format is plugin.proto's ("Recordings"): the 8 bytes "CTRLREC\n", a RecordingHeader, then
// ReconcileRecords, each message preceded by its length as a base-128 varint. One controller's
// files share a directory, named 00000001.ctrlrec, 00000002.ctrlrec, ... in the order they were
// written; a recording may also hold one such directory per controller.
//
//   absl::StatusOr<std::vector<std::string>> files = FindRecording("testdata/rec", "greeter");
//   absl::StatusOr<RecordingFile> file = ReadRecording((*files)[0]);
//   for (const RecordingFile::Record& r : file->records) { ... r.offset, r.record ... }
//
// Errors name the file and the byte offset where the problem starts, with the texts
// `ctrlhost replay` and the other SDKs use: InvalidArgument for a file that is not a recording
// or a record that does not parse, FailedPrecondition for a newer format, DataLoss for a record
// cut short (its writer was killed mid-record).
//
// The SDK reads recordings on its own (it does not depend on the host's //runtime code). Pure
// functions and plain values.
#ifndef CTRLHOST_SDK_CPP_RECORDING_H_
#define CTRLHOST_SDK_CPP_RECORDING_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ctrlhost/plugin/v1alpha1/plugin.pb.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"

namespace ctrlhost::sdk::testing {

// The first bytes of every recording file.
inline constexpr absl::string_view kRecordingMagic = absl::string_view("CTRLREC\n", 8);
// The newest RecordingHeader.format this code reads.
inline constexpr uint32_t kRecordingFormat = 1;
// A longer record is refused as corrupt (a request and a response are 64 MiB at most).
inline constexpr uint64_t kMaxRecordBytes = uint64_t{256} << 20;

// One recording file, read whole.
struct RecordingFile {
  struct Record {
    uint64_t offset = 0;  // where its length prefix starts
    std::string frame;    // its bytes as read: length prefix and message
    pluginpb::ReconcileRecord record;
  };
  std::string path;
  pluginpb::RecordingHeader header;
  std::string start;  // the magic and the framed header, as read
  std::vector<Record> records;
};

// Reads and checks the file at `path`: magic, header, every record.
absl::StatusOr<RecordingFile> ReadRecording(const std::string& path);

// The files to replay, in the order they were written: `path` itself when it is a file; the
// recording files (<at least 8 digits>.ctrlrec) of the directory `path`; else those of its
// subdirectory `controller` (one subdirectory per controller). With `controller` empty, the
// directory must hold exactly one such subdirectory. NotFound or InvalidArgument naming what
// was found otherwise.
absl::StatusOr<std::vector<std::string>> FindRecording(const std::string& path,
                                                       const std::string& controller);

// Rewrites `file` with `replaced` (by index into file.records) in place of the records read;
// the magic, the header and every other record keep their bytes. Writes a temporary file in the
// same directory and renames it over the file, so a reader sees the old file or the new one.
absl::Status RewriteRecording(const RecordingFile& file,
                              const std::map<size_t, pluginpb::ReconcileRecord>& replaced);

}  // namespace ctrlhost::sdk::testing

#endif  // CTRLHOST_SDK_CPP_RECORDING_H_
