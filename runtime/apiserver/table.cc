// meta.k8s.io/v1 Table output, which `kubectl get` asks for: the columns come from printers.h
// (kube-apiserver's built-in printers, a CRD's additionalPrinterColumns), the rows carry the
// object as the includeObject parameter asks. TableFormat writes a Table in pieces (head, rows)
// for LISTs streamed row by row; TableOf assembles the same pieces into one document.
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/apiserver/handlers_internal.h"
#include "runtime/apiserver/object_util.h"
#include "runtime/apiserver/printers.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::apiserver {
namespace {

// What one media range of an Accept header asks for.
enum class Wants { kTable, kPartialMetadata, kOtherTransform, kPlain };

Wants ClassifyMediaRange(absl::string_view range) {
  absl::string_view as, group, version;
  bool first = true;
  for (absl::string_view part : absl::StrSplit(range, ';')) {
    part = absl::StripAsciiWhitespace(part);
    if (first) {  // the media type itself
      first = false;
      continue;
    }
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(part, absl::MaxSplits('=', 1));
    const absl::string_view key = absl::StripAsciiWhitespace(kv.first);
    const absl::string_view value = absl::StripAsciiWhitespace(kv.second);
    if (key == "as") as = value;
    if (key == "g") group = value;
    if (key == "v") version = value;
  }
  if (as.empty()) return Wants::kPlain;
  if (as == "Table" && (group.empty() || group == "meta.k8s.io") &&
      (version.empty() || version == "v1" || version == "v1beta1")) {
    return Wants::kTable;
  }
  // client-go's metadata client: ...;as=PartialObjectMetadata;g=meta.k8s.io;v=v1 for a get or a
  // watch, as=PartialObjectMetadataList for a list. Only the JSON ranges count (this server
  // serves no protobuf: a protobuf range is skipped, and the client then takes the JSON one).
  if ((as == "PartialObjectMetadata" || as == "PartialObjectMetadataList") &&
      group == "meta.k8s.io" && (version == "v1" || version == "v1beta1") &&
      absl::StartsWith(absl::StripAsciiWhitespace(range), "application/json")) {
    return Wants::kPartialMetadata;
  }
  return Wants::kOtherTransform;
}

// The first transform the Accept header asks for before any plain media range.
Wants FirstTransform(absl::string_view accept) {
  for (absl::string_view range : absl::StrSplit(accept, ',', absl::SkipWhitespace())) {
    const Wants wants = ClassifyMediaRange(range);
    if (wants != Wants::kOtherTransform) return wants;
  }
  return Wants::kPlain;
}

}  // namespace

bool WantsTable(absl::string_view accept) { return FirstTransform(accept) == Wants::kTable; }

bool WantsPartialMetadata(absl::string_view accept) {
  return FirstTransform(accept) == Wants::kPartialMetadata;
}

std::string PartialMetadataBytes(const std::string& stored_value) {
  nlohmann::json object = nlohmann::json::parse(stored_value, nullptr, false);
  nlohmann::json out = {{"kind", "PartialObjectMetadata"}, {"apiVersion", "meta.k8s.io/v1"}};
  out["metadata"] = object.is_object() && object.contains("metadata") ? object["metadata"]
                                                                      : nlohmann::json::object();
  return Dump(out);
}

absl::StatusOr<TableOptions> TableOptionsOf(const ApiRequest& req) {
  TableOptions o;
  auto it = req.query.find("includeObject");
  if (it == req.query.end() || it->second.empty() || it->second == "Metadata") return o;
  if (it->second == "None") {
    o.include_object = TableOptions::IncludeObject::kNone;
  } else if (it->second == "Object") {
    o.include_object = TableOptions::IncludeObject::kObject;
  } else {
    return kube::BadRequestError(
        absl::StrCat("unrecognized includeObject value: \"", it->second, "\""));
  }
  return o;
}

TableFormat::TableFormat(const ResourceInfo& r, absl::Time now, TableOptions options)
    : r_(&r), printer_(TablePrinter::For(r)), now_(now), options_(options) {}

nlohmann::json TableFormat::Head(int64_t revision, const std::string& continue_token,
                                 const std::string& shard_selector) const {
  nlohmann::json meta = {{"resourceVersion", std::to_string(revision)}};
  if (!continue_token.empty()) meta["continue"] = continue_token;
  if (!shard_selector.empty()) meta["shardInfo"] = {{"selector", shard_selector}};
  return {{"kind", "Table"},
          {"apiVersion", "meta.k8s.io/v1"},
          {"metadata", std::move(meta)},
          {"columnDefinitions", printer_.ColumnDefinitions()}};
}

std::string TableFormat::HeadBytes(int64_t revision, const std::string& continue_token,
                                   const std::string& shard_selector) const {
  nlohmann::json head = Head(revision, continue_token, shard_selector);
  head["rows"] = nlohmann::json::array();
  // nlohmann::json writes keys in sorted order and "rows" sorts after every key of the head,
  // so the text ends with the empty rows array: `...,"rows":[]}`. Cut to `...,"rows":[`.
  std::string bytes = Dump(head);
  bytes.resize(bytes.size() - kTail.size());
  return bytes;
}

std::optional<nlohmann::json> TableFormat::Row(const StoredObject& o) const {
  nlohmann::json stored = nlohmann::json::parse(o.value, nullptr, false);
  if (stored.is_discarded() || !stored.is_object()) return std::nullopt;
  nlohmann::json served = ToServed(*r_, stored);
  nlohmann::json row = {{"cells", printer_.Cells(stored, served, now_)}};
  switch (options_.include_object) {
    case TableOptions::IncludeObject::kNone:
      row["object"] = nullptr;
      break;
    case TableOptions::IncludeObject::kMetadata: {
      nlohmann::json meta =
          served.contains("metadata") ? std::move(served["metadata"]) : nlohmann::json::object();
      row["object"] = {{"kind", "PartialObjectMetadata"},
                       {"apiVersion", "meta.k8s.io/v1"},
                       {"metadata", std::move(meta)}};
      break;
    }
    case TableOptions::IncludeObject::kObject:
      row["object"] = std::move(served);
      break;
  }
  return row;
}

std::optional<std::string> TableFormat::RowBytes(const StoredObject& o) const {
  std::optional<nlohmann::json> row = Row(o);
  if (!row.has_value()) return std::nullopt;
  return Dump(*row);
}

nlohmann::json TableOf(const ResourceInfo& r, const std::vector<ObjectPtr>& items, int64_t revision,
                       const std::string& continue_token, absl::Time now,
                       const TableOptions& options) {
  const TableFormat format(r, now, options);
  nlohmann::json rows = nlohmann::json::array();
  for (const ObjectPtr& o : items) {
    std::optional<nlohmann::json> row = format.Row(*o);
    if (row.has_value()) rows.push_back(*std::move(row));
  }
  nlohmann::json table = format.Head(revision, continue_token);
  table["rows"] = std::move(rows);
  return table;
}

}  // namespace ctrlhost::apiserver
