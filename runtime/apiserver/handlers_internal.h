// Pieces shared by the handler files (handlers*.cc). Not part of the public interface.
#ifndef CTRLHOST_RUNTIME_APISERVER_HANDLERS_INTERNAL_H_
#define CTRLHOST_RUNTIME_APISERVER_HANDLERS_INTERNAL_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "runtime/apiserver/handlers.h"
#include "runtime/apiserver/printers.h"
#include "runtime/kube/selector.h"
#include "runtime/kube/shard_selector.h"

namespace ctrlhost::apiserver {

struct ApiHandlers::Target {
  ResourcePtr r;
  std::string ns;
  std::string name;
  std::string subresource;
};

// Label and field selectors of a list or watch, applied to stored objects.
struct ObjectFilter {
  std::shared_ptr<const kube::LabelSelector> labels;
  std::shared_ptr<const kube::FieldSelector> fields;
  // KEP-5866's shardSelector (shard_selector.h), or null.
  std::shared_ptr<const kube::ShardSelector> shard;
  std::vector<std::string> extra_fields;  // fields that need the object parsed
  bool needs_parse = false;
  bool namespaced = true;

  bool Empty() const { return labels == nullptr && fields == nullptr && shard == nullptr; }
  bool Matches(const StoredObject& o) const;
};

// 500 InternalError naming the key when `o` failed its checksum on disk (StoredObject::corrupt):
// such bytes are never served.
absl::Status CheckIntact(const StoredObject& o);

// The stored JSON as served at `r`'s version (the bytes as they are when nothing changes).
std::string ServedBytes(const ResourceInfo& r, const std::string& stored_value);

// True if the Accept header asks for a meta.k8s.io Table (kubectl get does): a media range
// with as=Table (g=meta.k8s.io, v=v1 or v1beta1 when given) before any plain one.
bool WantsTable(absl::string_view accept);

// True if the Accept header asks for meta.k8s.io/v1 PartialObjectMetadata (a get or a watch) or
// PartialObjectMetadataList (a list) in JSON before any plain media range: client-go's metadata
// client and metadata-only informers.
bool WantsPartialMetadata(absl::string_view accept);
// {"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":...} of a stored
// object.
std::string PartialMetadataBytes(const std::string& stored_value);

// What a Table's rows carry in `object` (the includeObject query parameter, as kube).
struct TableOptions {
  enum class IncludeObject {
    kNone,      // null
    kMetadata,  // a meta.k8s.io/v1 PartialObjectMetadata (the default)
    kObject,    // the whole object as served (kubectl --sort-by asks for it)
  };
  IncludeObject include_object = IncludeObject::kMetadata;
};
// The Table options of a request; BadRequest for an includeObject other than None, Metadata
// or Object (absent or empty means Metadata).
absl::StatusOr<TableOptions> TableOptionsOf(const ApiRequest& req);

// A meta.k8s.io/v1 Table written in pieces, so that a long LIST can be streamed row by row
// (ListBody) and still be, byte for byte, the Table TableOf() gives for the same arguments:
//
//   TableFormat format(r, now, options);
//   std::string text = format.HeadBytes(revision, continue_token);  // `{...,"rows":[`
//   // then format.RowBytes(*item) of each item for which it is not nullopt, joined by ','
//   absl::StrAppend(&text, TableFormat::kTail);
//   // text == Dump(TableOf(r, items, revision, continue_token, now, options))
//
// `now` is fixed at construction: every row's ages count from the same instant, however long
// the answer takes to write. Borrows `r`, which must outlive it. Immutable: safe to share
// between threads.
class TableFormat {
 public:
  // Closes the rows array and the Table that HeadBytes() opened.
  static constexpr absl::string_view kTail = "]}";

  TableFormat(const ResourceInfo& r, absl::Time now, TableOptions options);

  // The Table without "rows": kind, apiVersion, metadata (resourceVersion, and continue when
  // `continue_token` is not empty) and columnDefinitions.
  // `shard_selector`: the KEP-5866 selector applied, as ListMeta's shardInfo ("" for none).
  nlohmann::json Head(int64_t revision, const std::string& continue_token,
                      const std::string& shard_selector = "") const;
  // The text of the Table up to its first row: Dump of Head() with "rows" opened.
  std::string HeadBytes(int64_t revision, const std::string& continue_token,
                        const std::string& shard_selector = "") const;

  // One row: the cells of `r`'s printer columns and the object as TableOptions asks. nullopt
  // for an item whose stored bytes are not a JSON object: the Table leaves it out.
  std::optional<nlohmann::json> Row(const StoredObject& o) const;
  // Dump(*Row(o)), or nullopt as Row().
  std::optional<std::string> RowBytes(const StoredObject& o) const;

 private:
  const ResourceInfo* r_;
  TablePrinter printer_;
  absl::Time now_;
  TableOptions options_;
};

// A meta.k8s.io/v1 Table of `items` with kube-apiserver's columns for built-in kinds and a
// CRD's additionalPrinterColumns for custom resources (see printers.h), made of TableFormat's
// pieces.
nlohmann::json TableOf(const ResourceInfo& r, const std::vector<ObjectPtr>& items, int64_t revision,
                       const std::string& continue_token, absl::Time now,
                       const TableOptions& options = {});

}  // namespace ctrlhost::apiserver

#endif  // CTRLHOST_RUNTIME_APISERVER_HANDLERS_INTERNAL_H_
