#include "sdk/cpp/recording.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace ctrlhost::sdk::testing {
namespace {

namespace fs = std::filesystem;

constexpr absl::string_view kSuffix = ".ctrlrec";
constexpr size_t kMaxVarintBytes = 10;

// A message framed in a file: its body and where the next frame starts.
struct Frame {
  absl::string_view body;
  size_t next = 0;
};

// have and want count the frame from its start, length prefix and message; inside the length
// prefix, want is the least it needs (one byte more).
absl::Status CutShort(const std::string& path, absl::string_view what, size_t offset, size_t have,
                      size_t want) {
  return absl::DataLossError(absl::StrCat(path, ": ", what, " at offset ", offset,
                                          " is cut short (", have, " of ", want,
                                          " bytes): the recording was interrupted"));
}

// The frame at data[offset:] (what: "header" or "record", for errors); nullopt at the end.
absl::StatusOr<std::optional<Frame>> ReadFrame(const std::string& path, absl::string_view data,
                                               size_t offset, absl::string_view what) {
  if (offset >= data.size()) return std::nullopt;
  uint64_t length = 0;
  size_t pos = offset;
  for (int shift = 0;; shift += 7) {
    if (pos == data.size()) {
      return CutShort(path, what, offset, pos - offset, pos - offset + 1);
    }
    const uint8_t byte = static_cast<uint8_t>(data[pos]);
    const size_t index = pos++ - offset;
    // Like Go's binary.Uvarint: at most 10 bytes, the 10th holding the 64th bit only.
    if (index == kMaxVarintBytes || (index == kMaxVarintBytes - 1 && byte > 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": ", what, " at offset ", offset, " has a malformed length"));
    }
    length |= uint64_t{byte & 0x7Fu} << shift;
    if ((byte & 0x80) == 0) break;
  }
  if (length > kMaxRecordBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": ", what, " at offset ", offset, " claims ", length,
        " bytes, more than the limit of ", kMaxRecordBytes, " bytes: the file is corrupt"));
  }
  if (length > data.size() - pos) {
    return CutShort(path, what, offset, data.size() - offset, pos - offset + length);
  }
  return Frame{data.substr(pos, length), pos + length};
}

absl::StatusOr<std::string> ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  std::ostringstream data;
  data << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": cannot read"));
  return data.str();
}

// The header of `data` (after the magic) and where the records start.
absl::Status ReadHeader(const std::string& path, absl::string_view data, RecordingFile* file) {
  if (!absl::StartsWith(data, kRecordingMagic)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a ctrlhost recording (no CTRLREC magic at offset 0)"));
  }
  const size_t offset = kRecordingMagic.size();
  absl::StatusOr<std::optional<Frame>> frame = ReadFrame(path, data, offset, "header");
  if (!frame.ok()) return frame.status();
  if (!frame->has_value()) {
    return absl::DataLossError(absl::StrCat(path, ": ends before its header at offset ", offset,
                                            ": the recording was interrupted"));
  }
  if (!file->header.ParseFromArray((*frame)->body.data(), (*frame)->body.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": the header at offset ", offset, " is not a valid RecordingHeader"));
  }
  if (file->header.format() > kRecordingFormat) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": recording format ", file->header.format(),
                     " is newer than this reader (it reads format ", kRecordingFormat, ")"));
  }
  file->start = std::string(data.substr(0, (*frame)->next));
  return absl::OkStatus();
}

// The recording files of `dir` by sequence; empty when it holds none or is not a directory.
std::vector<std::string> RecordingFiles(const fs::path& dir) {
  std::vector<std::pair<uint64_t, std::string>> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    absl::string_view digits = name;
    uint64_t index = 0;
    if (it->is_directory(ec) || !absl::ConsumeSuffix(&digits, kSuffix) || digits.size() < 8 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        !absl::SimpleAtoi(digits, &index)) {
      continue;
    }
    found.emplace_back(index, it->path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> files;
  for (auto& [index, file] : found) files.push_back(std::move(file));
  return files;
}

std::string Framed(const google::protobuf::MessageLite& message) {
  const std::string body = message.SerializeAsString();
  std::string out;
  for (uint64_t n = body.size();; n >>= 7) {
    if (n < 0x80) {
      out.push_back(static_cast<char>(n));
      break;
    }
    out.push_back(static_cast<char>((n & 0x7F) | 0x80));
  }
  return out + body;
}

// Writes `data` to a temporary file beside `path` (with its mode) and renames it over `path`.
absl::Status ReplaceFile(const std::string& path, absl::string_view data) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0) {
    return absl::NotFoundError(absl::StrCat(path, ": ", std::strerror(errno)));
  }
  const fs::path target(path);
  std::string tmp =
      (target.parent_path() / ("." + target.filename().string() + ".XXXXXX")).string();
  const int fd = mkstemp(tmp.data());
  if (fd < 0) return absl::PermissionDeniedError(absl::StrCat(tmp, ": ", std::strerror(errno)));
  std::string error;
  if (fchmod(fd, info.st_mode & 07777) != 0) error = std::strerror(errno);
  for (size_t done = 0; error.empty() && done < data.size();) {
    const ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n == 0 || errno != EINTR) {
      error = std::strerror(errno);
    }
  }
  if (close(fd) != 0 && error.empty()) error = std::strerror(errno);
  if (error.empty() && rename(tmp.c_str(), path.c_str()) != 0) error = std::strerror(errno);
  if (!error.empty()) {
    unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat(path, ": cannot rewrite: ", error));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RecordingFile> ReadRecording(const std::string& path) {
  absl::StatusOr<std::string> data = ReadWhole(path);
  if (!data.ok()) return data.status();
  RecordingFile file;
  file.path = path;
  if (absl::Status s = ReadHeader(path, *data, &file); !s.ok()) return s;
  for (size_t offset = file.start.size(); offset < data->size();) {
    absl::StatusOr<std::optional<Frame>> frame = ReadFrame(path, *data, offset, "record");
    if (!frame.ok()) return frame.status();
    RecordingFile::Record r;
    r.offset = offset;
    if (!r.record.ParseFromArray((*frame)->body.data(), (*frame)->body.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": record at offset ", offset, " is not a valid ReconcileRecord"));
    }
    r.frame = data->substr(offset, (*frame)->next - offset);
    offset = (*frame)->next;
    file.records.push_back(std::move(r));
  }
  return file;
}

absl::StatusOr<std::vector<std::string>> FindRecording(const std::string& path,
                                                       const std::string& controller) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file or directory"));
  }
  if (!fs::is_directory(status)) return std::vector<std::string>{path};
  std::vector<std::string> files = RecordingFiles(path);
  if (!files.empty()) return files;
  std::vector<std::string> controllers;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_directory(ec) && !RecordingFiles(it->path()).empty()) {
      controllers.push_back(it->path().filename().string());
    }
  }
  std::sort(controllers.begin(), controllers.end());
  const std::string found =
      controllers.empty() ? "none" : absl::StrCat("found: ", absl::StrJoin(controllers, ", "));
  if (!controller.empty()) {
    if (std::find(controllers.begin(), controllers.end(), controller) != controllers.end()) {
      return RecordingFiles(fs::path(path) / controller);
    }
    return absl::NotFoundError(
        absl::StrCat(path, ": holds no recording of controller ", controller, " (", found, ")"));
  }
  if (controllers.size() == 1) return RecordingFiles(fs::path(path) / controllers[0]);
  if (controllers.empty()) {
    return absl::NotFoundError(absl::StrCat(path, ": holds no recording files (*", kSuffix,
                                            "), directly or per controller"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": holds recordings of several controllers (", found, "): name one"));
}

absl::Status RewriteRecording(const RecordingFile& file,
                              const std::map<size_t, pluginpb::ReconcileRecord>& replaced) {
  std::string out = file.start;
  for (size_t i = 0; i < file.records.size(); ++i) {
    auto it = replaced.find(i);
    out += it == replaced.end() ? file.records[i].frame : Framed(it->second);
  }
  return ReplaceFile(file.path, out);
}

}  // namespace ctrlhost::sdk::testing
