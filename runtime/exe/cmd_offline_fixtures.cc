// Fixture files of `ctrlhost test` (cmd_offline.h): YAML or JSON documents, one file or a
// directory of them.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/cache/object.h"
#include "runtime/common/yaml_json.h"
#include "runtime/exe/cmd_offline.h"

namespace ctrlhost::exe {
namespace {

namespace fs = std::filesystem;

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  if (fs::is_directory(st)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, expected a file"));
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) {
    return absl::PermissionDeniedError(absl::StrCat(path, ": cannot be read"));
  }
  return text.str();
}

}  // namespace

absl::StatusOr<std::vector<FixtureDocument>> LoadFixtureFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<std::vector<nlohmann::json>> docs = common::YamlDocumentsToJson(*text);
  if (!docs.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", docs.status().message()));
  }
  std::vector<FixtureDocument> result;
  cache::ObjectParser parser;
  for (size_t i = 0; i < docs->size(); ++i) {
    nlohmann::json& object = (*docs)[i];
    if (object.is_null()) continue;
    const std::string origin =
        docs->size() == 1 ? path : absl::StrCat(path, " (document ", i + 1, ")");
    if (!object.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(origin, ": expected a Kubernetes object, got a ", object.type_name()));
    }
    for (const char* field : {"apiVersion", "kind"}) {
      auto value = object.find(field);
      if (value == object.end() || !value->is_string() ||
          value->get_ref<const std::string&>().empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(origin, ": ", field, " is missing or not a non-empty string"));
      }
    }
    // The host's cache accepts only objects with well-formed metadata; so does the fixture.
    if (absl::StatusOr<std::shared_ptr<const cache::Object>> parsed = parser.Parse(object.dump());
        !parsed.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(origin, ": ", parsed.status().message()));
    }
    result.push_back({origin, std::move(object)});
  }
  return result;
}

absl::StatusOr<std::vector<FixtureDocument>> LoadFixtureDir(const std::string& dir) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (!fs::exists(st)) return absl::NotFoundError(absl::StrCat(dir, ": no such directory"));
  if (!fs::is_directory(st)) {
    return absl::InvalidArgumentError(absl::StrCat(dir, ": not a directory"));
  }
  std::vector<std::string> files;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string ext = it->path().extension().string();
    if (it->is_regular_file(ec) && (ext == ".yaml" || ext == ".yml" || ext == ".json")) {
      files.push_back(it->path().string());
    }
  }
  if (ec) return absl::PermissionDeniedError(absl::StrCat(dir, ": ", ec.message()));
  std::sort(files.begin(), files.end());
  std::vector<FixtureDocument> result;
  for (const std::string& file : files) {
    absl::StatusOr<std::vector<FixtureDocument>> docs = LoadFixtureFile(file);
    if (!docs.ok()) return docs.status();
    for (FixtureDocument& doc : *docs) result.push_back(std::move(doc));
  }
  return result;
}

}  // namespace ctrlhost::exe
