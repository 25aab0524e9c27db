// Kubernetes JSONPath (k8s.io/client-go/util/jsonpath) as CustomResourceDefinitions use it in
// additionalPrinterColumns: parsed once, evaluated against objects held as nlohmann::json.
//
//   ASSIGN_OR_RETURN(JsonPath path,
//                    JsonPath::Parse(R"(.status.conditions[?(@.type=="Ready")].status)"));
//   std::vector<const nlohmann::json*> found = path.FindAll(object);  // {"True"} or {}
//
// Supported syntax (one expression; "{...}" around it and a leading "$" are accepted):
//   .field  .field\.with\.dots  .*  ..field (recursive descent)
//   ['field']  ["a.b"]  ['a','b']          quoted names, unions
//   [0]  [-1]  [1,3]  [1:3]  [::2]  [*]     indexes (negative from the end), slices, wildcard
//   [?(@.type=="Ready")]                    filters: ==, !=, <, <=, >, >= between a relative
//   [?(@.spec.size>=3)]  [?(@.ready)]       path (@...) and a string, number, true/false or
//                                           null literal or another relative path; a bare
//                                           path tests existence
// Not supported (InvalidArgument at Parse): several expressions or text around them
// ("{.a}{.b}", "x{.a}"), range/end, && and || in filters.
//
// Evaluation follows the upstream library with missing keys allowed: a missing field, an index
// out of range or a filter over a non-array yields no result, never an error. Comparisons
// between different JSON types are false (upstream errors, which a printer column shows as an
// empty cell too); numbers compare by value whether integer or floating point.
//
// Untrusted input: Parse bounds the expression's length and nesting, and FindAll walks
// recursive descent with an explicit stack, so neither a hostile path nor a deep object can
// exhaust the stack. A JsonPath is immutable and safe to use from several threads at once.
#ifndef CTRLHOST_RUNTIME_APISERVER_JSONPATH_H_
#define CTRLHOST_RUNTIME_APISERVER_JSONPATH_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace ctrlhost::apiserver {

class JsonPath {
 public:
  // Longest expression Parse accepts, and deepest nesting of filters.
  static constexpr size_t kMaxLength = 4096;
  static constexpr int kMaxFilterDepth = 8;

  // InvalidArgument naming the offending position when `expression` is not a valid path.
  static absl::StatusOr<JsonPath> Parse(absl::string_view expression);

  // Every value the path selects in `root`, in document order. The pointers borrow from
  // `root` and are valid while it is unchanged.
  std::vector<const nlohmann::json*> FindAll(const nlohmann::json& root) const;
  // The first value selected, or null when there is none.
  const nlohmann::json* FindFirst(const nlohmann::json& root) const;

  const std::string& expression() const { return expression_; }

  struct Step;  // defined in jsonpath.cc

 private:
  JsonPath() = default;

  std::string expression_;
  // Shared so that copies stay cheap; never modified after Parse.
  std::shared_ptr<const std::vector<Step>> steps_;
};

}  // namespace ctrlhost::apiserver

#endif  // CTRLHOST_RUNTIME_APISERVER_JSONPATH_H_
