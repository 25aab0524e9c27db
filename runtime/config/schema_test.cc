// docs/operator-spec.schema.json, docs/operator-spec.md and plugins/examples/operator.yaml agree
// with the parser: the schema describes exactly the fields the parser accepts, and every yaml
// example parses.
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/config/load.h"

namespace ctrlhost::config {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.is_open()) << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

nlohmann::json Schema() {
  return nlohmann::json::parse(ReadFile("docs/operator-spec.schema.json"));
}

// `node` with "$ref": "#/$defs/x" replaced by the definition.
const nlohmann::json& Resolve(const nlohmann::json& root, const nlohmann::json& node) {
  if (node.is_object() && node.contains("$ref")) {
    const std::string ref = node["$ref"];
    EXPECT_TRUE(absl::StartsWith(ref, "#/$defs/")) << ref;
    return root["$defs"][ref.substr(8)];
  }
  return node;
}

// Every property path under `node`, in KnownFieldPaths()'s notation.
void Walk(const nlohmann::json& root, const nlohmann::json& raw, const std::string& path,
          std::set<std::string>& out) {
  const nlohmann::json& node = Resolve(root, raw);
  if (!node.is_object()) return;
  if (node.contains("properties")) {
    for (const auto& [name, child] : node["properties"].items()) {
      const std::string child_path = path.empty() ? name : absl::StrCat(path, ".", name);
      out.insert(child_path);
      Walk(root, child, child_path, out);
    }
  }
  if (node.contains("items")) Walk(root, node["items"], absl::StrCat(path, "[]"), out);
  if (node.contains("oneOf")) {
    for (const nlohmann::json& alternative : node["oneOf"]) Walk(root, alternative, path, out);
  }
}

TEST(SchemaTest, SchemaAndParserAcceptTheSameFields) {
  const nlohmann::json schema = Schema();
  std::set<std::string> in_schema;
  Walk(schema, schema, "", in_schema);
  const std::vector<std::string> known = KnownFieldPaths();
  const std::set<std::string> in_parser(known.begin(), known.end());
  for (const std::string& path : in_parser) {
    EXPECT_TRUE(in_schema.count(path))
        << path << " is accepted by the parser but not in the schema";
  }
  for (const std::string& path : in_schema) {
    EXPECT_TRUE(in_parser.count(path)) << path << " is in the schema but the parser refuses it";
  }
}

TEST(SchemaTest, SchemaRejectsUnknownFieldsEverywhere) {
  // Every object with properties says additionalProperties: false, as the parser does.
  const nlohmann::json schema = Schema();
  std::vector<std::string> open_objects;
  std::function<void(const nlohmann::json&, const std::string&)> check =
      [&](const nlohmann::json& node, const std::string& where) {
        if (node.is_object()) {
          if (node.contains("properties") && node.value("additionalProperties", true) != false) {
            open_objects.push_back(where);
          }
          for (const auto& [k, v] : node.items()) check(v, absl::StrCat(where, "/", k));
        } else if (node.is_array()) {
          for (size_t i = 0; i < node.size(); ++i) check(node[i], absl::StrCat(where, "/", i));
        }
      };
  check(schema, "#");
  EXPECT_THAT(open_objects, ::testing::IsEmpty());
}

TEST(SchemaTest, DocExamplesParse) {
  const std::string doc = ReadFile("docs/operator-spec.md");
  std::vector<std::string> examples;
  for (absl::string_view part : absl::StrSplit(doc, "```yaml\n")) examples.emplace_back(part);
  examples.erase(examples.begin());  // the text before the first example
  ASSERT_GE(examples.size(), 3u);
  for (size_t i = 0; i < examples.size(); ++i) {
    const std::string text = examples[i].substr(0, examples[i].find("```"));
    absl::StatusOr<std::vector<OperatorSpec>> ops =
        ParseOperators(text, absl::StrCat("docs/operator-spec.md example ", i + 1));
    ASSERT_TRUE(ops.ok()) << ops.status();
    EXPECT_FALSE(ops->empty());
  }
}

TEST(SchemaTest, ExampleOperatorFileLoads) {
  absl::StatusOr<std::vector<OperatorSpec>> ops = LoadOperators("plugins/examples/operator.yaml");
  ASSERT_TRUE(ops.ok()) << ops.status();
  ASSERT_EQ(ops->size(), 1u);
  EXPECT_EQ((*ops)[0].name, "examples");
  EXPECT_NE((*ops)[0].FindPlugin("webapp"), nullptr);
}

}  // namespace
}  // namespace ctrlhost::config
