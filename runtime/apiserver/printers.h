// The columns `kubectl get` shows for each resource of the embedded API server, computed on the
// server as kube-apiserver does (meta.k8s.io/v1 Table): the built-in kinds' printers
// (pkg/printers/internalversion in Kubernetes), a custom resource's additionalPrinterColumns,
// and a Name/Age fallback for anything else.
//
//   TablePrinter printer = TablePrinter::For(*resource);
//   nlohmann::json columns = printer.ColumnDefinitions();        // TableColumnDefinition[]
//   nlohmann::json cells = printer.Cells(stored, served, now);   // one row's cells
//
// As upstream, every column is produced, "-o wide" ones with priority 1; kubectl hides those
// unless asked. Cells are JSON strings, integers, numbers or booleans, or null for "no value"
// (kubectl prints <none>). Ages are HumanDuration(now - timestamp).
//
// Guarantees: no input object, however malformed, makes a printer throw or crash; a field of
// the wrong type prints as absent. A custom resource column whose jsonPath does not parse
// prints null in every row (kube rejects such CRDs at validation; we print rather than fail
// the whole list). A TablePrinter is immutable and safe to share between threads.
#ifndef CTRLHOST_RUNTIME_APISERVER_PRINTERS_H_
#define CTRLHOST_RUNTIME_APISERVER_PRINTERS_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "runtime/apiserver/jsonpath.h"
#include "runtime/apiserver/resource_registry.h"

namespace ctrlhost::apiserver {

// apimachinery's duration.HumanDuration: "45s", "6m16s", "3h5m", "2d3h", "400d", "3y12d";
// "0s" for up to one second in the future (clock skew), "<invalid>" beyond.
std::string HumanDuration(absl::Duration d);

// Parses an RFC 3339 timestamp (with or without fractional seconds). nullopt when `ts` is not
// one; absl::InfinitePast() for Go's zero time, which Kubernetes prints as "<unknown>".
std::optional<absl::Time> ParseTimestamp(absl::string_view ts);

// Kubernetes' translateTimestampSince of a timestamp field's value: "<unknown>" when the field
// is absent, null, empty or the zero time, "<invalid>" when it is not a timestamp, else the
// HumanDuration since it.
std::string TimestampAge(const nlohmann::json& value, absl::Time now);

// labels.FormatLabels: "a=1,b=2" sorted by key, "<none>" when empty or not an object.
std::string FormatLabels(const nlohmann::json& labels);
// metav1.LabelSelectorAsSelector(s).String(): "app=web,tier in (a,b),!legacy" sorted by key,
// "" for an absent or empty selector, "<invalid>" for a malformed one.
std::string FormatLabelSelector(const nlohmann::json& selector);

class TablePrinter {
 public:
  // Computes one row's cells from the object's stored form (the storage version, e.g. core/v1
  // for events.k8s.io Events) and its served form (the version asked for).
  using CellsFn = std::function<nlohmann::json(const nlohmann::json& stored,
                                               const nlohmann::json& served, absl::Time now)>;

  // The printer of `r`: built-in kinds by group/resource, custom resources from their
  // printer columns (Name + Age when they have none), Name + Age for other kinds.
  static TablePrinter For(const ResourceInfo& r);

  // A CustomResourceDefinition's additionalPrinterColumns (as stored in ResourceInfo).
  static TablePrinter ForCustomResource(const nlohmann::json& printer_columns);

  // TableColumnDefinition objects: name, type, format, description, priority.
  const nlohmann::json& ColumnDefinitions() const { return *columns_; }
  // One row's cells, as many as there are column definitions.
  nlohmann::json Cells(const nlohmann::json& stored, const nlohmann::json& served,
                       absl::Time now) const {
    return cells_(stored, served, now);
  }

 private:
  TablePrinter(nlohmann::json columns, CellsFn cells)
      : columns_(std::make_shared<const nlohmann::json>(std::move(columns))),
        cells_(std::move(cells)) {}

  std::shared_ptr<const nlohmann::json> columns_;
  CellsFn cells_;
};

// The cell of a custom resource column of `type` ("integer", "number", "boolean", "string",
// "date") for the first value its JSONPath found (null when none), as the apiextensions
// table convertor makes it: strings print objects and arrays as JSON, typed columns are null
// when the value has another type, dates are ages ("<invalid>" when not a timestamp).
nlohmann::json CustomColumnCell(absl::string_view type, const nlohmann::json* value,
                                absl::Time now);

}  // namespace ctrlhost::apiserver

#endif  // CTRLHOST_RUNTIME_APISERVER_PRINTERS_H_
