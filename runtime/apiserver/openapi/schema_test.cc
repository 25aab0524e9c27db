#include "runtime/apiserver/openapi/schema.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/kube/api_status.h"

namespace ctrlhost::apiserver::openapi {
namespace {

using nlohmann::json;

// An object {"spec": {"f": value}} under a schema whose spec.f is `field`.
json SchemaWith(const json& field) {
  return {{"type", "object"},
          {"properties", {{"spec", {{"type", "object"}, {"properties", {{"f", field}}}}}}}};
}
json ObjectWith(const json& value) {
  return {{"apiVersion", "example.com/v1"},
          {"kind", "W"},
          {"metadata", {{"name", "w"}}},
          {"spec", {{"f", value}}}};
}

std::vector<std::string> Messages(const std::vector<kube::StatusCause>& causes) {
  std::vector<std::string> out;
  for (const auto& c : causes) out.push_back(c.field + ": " + c.message);
  return out;
}

struct KeywordCase {
  const char* name;
  const char* field_schema;
  const char* value;
  // Empty: valid. Else the single expected "field: message".
  const char* error;
  const char* reason = "FieldValueInvalid";
};

class KeywordTest : public ::testing::TestWithParam<KeywordCase> {};

TEST_P(KeywordTest, AcceptsOrRejects) {
  const KeywordCase& c = GetParam();
  json schema = SchemaWith(json::parse(c.field_schema));
  json object = ObjectWith(json::parse(c.value));
  std::vector<kube::StatusCause> causes = Validate(schema, object);
  if (std::string(c.error).empty()) {
    EXPECT_TRUE(causes.empty()) << testing::PrintToString(Messages(causes));
  } else {
    ASSERT_EQ(causes.size(), 1u) << testing::PrintToString(Messages(causes));
    EXPECT_EQ(causes[0].field + ": " + causes[0].message, c.error);
    EXPECT_EQ(causes[0].reason, c.reason);
  }
}

const KeywordCase kKeywordCases[] = {
    // type
    {"object_ok", R"({"type":"object"})", R"({})", ""},
    {"object_bad", R"({"type":"object"})", R"([])",
     R"(spec.f: Invalid value: "array": spec.f in body must be of type object: "array")"},
    {"array_ok", R"({"type":"array"})", R"([1])", ""},
    {"array_bad", R"({"type":"array"})", R"("x")",
     R"(spec.f: Invalid value: "string": spec.f in body must be of type array: "string")"},
    {"string_ok", R"({"type":"string"})", R"("x")", ""},
    {"string_bad", R"({"type":"string"})", R"(1)",
     R"(spec.f: Invalid value: "integer": spec.f in body must be of type string: "integer")"},
    {"integer_ok", R"({"type":"integer"})", R"(3)", ""},
    {"integer_float_integral_ok", R"({"type":"integer"})", R"(3.0)", ""},
    {"integer_bad", R"({"type":"integer"})", R"(1.5)",
     R"(spec.f: Invalid value: "number": spec.f in body must be of type integer: "number")"},
    {"number_ok", R"({"type":"number"})", R"(1.5)", ""},
    {"number_int_ok", R"({"type":"number"})", R"(2)", ""},
    {"number_bad", R"({"type":"number"})", R"(true)",
     R"(spec.f: Invalid value: "boolean": spec.f in body must be of type number: "boolean")"},
    {"boolean_ok", R"({"type":"boolean"})", R"(false)", ""},
    {"boolean_bad", R"({"type":"boolean"})", R"("true")",
     R"(spec.f: Invalid value: "string": spec.f in body must be of type boolean: "string")"},
    {"untyped_anything", R"({})", R"({"a":[1]})", ""},
    {"unknown_type_name_ignored", R"({"type":"quantity"})", R"(1)", ""},
    // nullable
    {"null_nullable_ok", R"({"type":"string","nullable":true})", R"(null)", ""},
    {"null_not_nullable", R"({"type":"string"})", R"(null)",
     R"(spec.f: Invalid value: "null": spec.f in body must be of type string: "null")"},
    // int-or-string
    {"ios_int", R"({"x-kubernetes-int-or-string":true})", R"(80)", ""},
    {"ios_string", R"({"x-kubernetes-int-or-string":true})", R"("http")", ""},
    {"ios_bad", R"({"x-kubernetes-int-or-string":true})", R"(true)",
     R"(spec.f: Invalid value: "boolean": spec.f in body must be of type integer,string: "boolean")"},
    // enum
    {"enum_ok", R"({"type":"string","enum":["a","b"]})", R"("b")", ""},
    {"enum_bad", R"({"type":"string","enum":["a","b"]})", R"("c")",
     R"(spec.f: Unsupported value: "c": supported values: "a", "b")", "FieldValueNotSupported"},
    {"enum_number_ok", R"({"type":"number","enum":[1,2.5]})", R"(1.0)", ""},
    // numbers
    {"minimum_ok", R"({"type":"integer","minimum":0})", R"(0)", ""},
    {"minimum_bad", R"({"type":"integer","minimum":0})", R"(-1)",
     "spec.f: Invalid value: -1: spec.f in body should be greater than or equal to 0"},
    {"exclusive_minimum_bad", R"({"type":"integer","minimum":0,"exclusiveMinimum":true})", R"(0)",
     "spec.f: Invalid value: 0: spec.f in body should be greater than 0"},
    {"maximum_ok", R"({"type":"number","maximum":1.5})", R"(1.5)", ""},
    {"maximum_bad", R"({"type":"number","maximum":1.5})", R"(2)",
     "spec.f: Invalid value: 2: spec.f in body should be less than or equal to 1.5"},
    {"exclusive_maximum_bad", R"({"type":"integer","maximum":10,"exclusiveMaximum":true})", R"(10)",
     "spec.f: Invalid value: 10: spec.f in body should be less than 10"},
    {"multiple_of_ok", R"({"type":"integer","multipleOf":5})", R"(15)", ""},
    {"multiple_of_bad", R"({"type":"integer","multipleOf":5})", R"(7)",
     "spec.f: Invalid value: 7: spec.f in body should be a multiple of 5"},
    {"int32_ok", R"({"type":"integer","format":"int32"})", R"(2147483647)", ""},
    {"int32_bad", R"({"type":"integer","format":"int32"})", R"(2147483648)",
     R"(spec.f: Invalid value: 2147483648: spec.f in body must be of type int32: "2147483648")"},
    {"int64_bad", R"({"type":"integer","format":"int64"})", R"(18446744073709551615)",
     R"(spec.f: Invalid value: 18446744073709551615: spec.f in body must be of type int64: "18446744073709551615")"},
    // strings
    {"min_length_ok", R"({"type":"string","minLength":2})", R"("éé")", ""},
    {"min_length_bad", R"({"type":"string","minLength":3})", R"("ab")",
     R"(spec.f: Invalid value: "ab": spec.f in body should be at least 3 chars long)"},
    {"max_length_ok", R"({"type":"string","maxLength":2})", R"("éé")", ""},
    {"pattern_ok", R"({"type":"string","pattern":"^[a-z]+$"})", R"("abc")", ""},
    {"pattern_bad", R"({"type":"string","pattern":"^[a-z]+$"})", R"("aBc")",
     R"(spec.f: Invalid value: "aBc": spec.f in body should match '^[a-z]+$')"},
    {"pattern_unanchored_ok", R"({"type":"string","pattern":"b"})", R"("abc")", ""},
    {"pattern_invalid_not_enforced", R"({"type":"string","pattern":"(["})", R"("abc")", ""},
    {"date_time_ok", R"({"type":"string","format":"date-time"})",
     R"("2024-01-02T03:04:05.5+01:00")", ""},
    {"date_time_bad", R"({"type":"string","format":"date-time"})", R"("yesterday")",
     R"(spec.f: Invalid value: "yesterday": spec.f in body must be of type date-time: "yesterday")"},
    {"date_ok", R"({"type":"string","format":"date"})", R"("2024-12-31")", ""},
    {"date_bad", R"({"type":"string","format":"date"})", R"("2024-13-01")",
     R"(spec.f: Invalid value: "2024-13-01": spec.f in body must be of type date: "2024-13-01")"},
    {"byte_ok", R"({"type":"string","format":"byte"})", R"("aGk=")", ""},
    {"byte_bad", R"({"type":"string","format":"byte"})", R"("a=Gk")",
     R"(spec.f: Invalid value: "a=Gk": spec.f in body must be of type byte: "a=Gk")"},
    {"uuid_ok", R"({"type":"string","format":"uuid"})", R"("123e4567-e89b-12d3-a456-426614174000")",
     ""},
    {"ipv4_ok", R"({"type":"string","format":"ipv4"})", R"("10.0.0.255")", ""},
    {"ipv4_bad", R"({"type":"string","format":"ipv4"})", R"("10.0.0.256")",
     R"(spec.f: Invalid value: "10.0.0.256": spec.f in body must be of type ipv4: "10.0.0.256")"},
    {"unknown_format_ignored", R"({"type":"string","format":"color"})", R"("x")", ""},
    // arrays
    {"min_items_ok", R"({"type":"array","minItems":1})", R"([1])", ""},
    {"min_items_bad", R"({"type":"array","minItems":2})", R"([1])",
     "spec.f: Invalid value: 1: spec.f in body should have at least 2 items"},
    {"max_items_ok", R"({"type":"array","maxItems":1})", R"([1])", ""},
    {"unique_items_ok", R"({"type":"array","uniqueItems":true})", R"([1,2])", ""},
    {"unique_items_bad", R"({"type":"array","uniqueItems":true})", R"(["a","b","a"])",
     R"(spec.f[2]: Duplicate value: "a")", "FieldValueDuplicate"},
    {"list_set_bad", R"({"type":"array","x-kubernetes-list-type":"set"})", R"([1,1])",
     R"(spec.f[1]: Duplicate value: 1)", "FieldValueDuplicate"},
    {"list_map_ok",
     R"({"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["name"]})",
     R"([{"name":"a","v":1},{"name":"b","v":1}])", ""},
    {"list_map_bad",
     R"({"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["name"]})",
     R"([{"name":"a","v":1},{"name":"a","v":2}])", R"(spec.f[1]: Duplicate value: {"name":"a"})",
     "FieldValueDuplicate"},
    {"items_bad", R"({"type":"array","items":{"type":"integer"}})", R"([1,"x"])",
     R"(spec.f[1]: Invalid value: "string": spec.f[1] in body must be of type integer: "string")"},
    // objects
    {"required_ok", R"({"type":"object","required":["a"]})", R"({"a":1})", ""},
    {"required_bad", R"({"type":"object","required":["a"]})", R"({})", "spec.f.a: Required value",
     "FieldValueRequired"},
    {"min_properties_bad", R"({"type":"object","minProperties":2})", R"({"a":1})",
     "spec.f: Invalid value: 1: spec.f in body should have at least 2 properties"},
    {"max_properties_bad", R"({"type":"object","maxProperties":1})", R"({"a":1,"b":2})",
     "spec.f: Invalid value: 2: spec.f in body should have at most 1 properties"},
    {"additional_properties_ok", R"({"type":"object","additionalProperties":{"type":"string"}})",
     R"({"a":"x"})", ""},
    {"additional_properties_bad", R"({"type":"object","additionalProperties":{"type":"string"}})",
     R"({"a":1})",
     R"(spec.f.a: Invalid value: "integer": spec.f.a in body must be of type string: "integer")"},
    {"nested_property_bad",
     R"({"type":"object","properties":{"b":{"type":"object","properties":{"c":{"type":"integer","maximum":1}}}}})",
     R"({"b":{"c":2}})",
     "spec.f.b.c: Invalid value: 2: spec.f.b.c in body should be less than or equal to 1"},
    // combinators
    {"all_of_bad", R"({"allOf":[{"minimum":1},{"maximum":3}]})", R"(4)",
     "spec.f: Invalid value: 4: spec.f in body should be less than or equal to 3"},
    {"any_of_ok", R"({"anyOf":[{"type":"integer"},{"type":"string"}]})", R"("x")", ""},
    {"any_of_bad", R"({"anyOf":[{"type":"integer"},{"type":"string"}]})", R"(true)",
     "spec.f: Invalid value: true: spec.f in body must validate at least one schema (anyOf)"},
    {"one_of_bad", R"({"oneOf":[{"minimum":1},{"minimum":2}]})", R"(3)",
     "spec.f: Invalid value: 3: spec.f in body must validate one and only one schema (oneOf)"},
    {"one_of_ok", R"({"oneOf":[{"minimum":1},{"minimum":5}]})", R"(3)", ""},
    {"not_bad", R"({"not":{"type":"string"}})", R"("x")",
     R"(spec.f: Invalid value: "x": spec.f in body must not validate the schema (not))"},
    // malformed keywords are ignored
    {"malformed_keywords",
     R"({"type":5,"minimum":"0","maxLength":-1,"enum":"a","required":"x","items":7,"properties":[]})",
     R"("anything")", ""},
};

INSTANTIATE_TEST_SUITE_P(Keywords, KeywordTest, ::testing::ValuesIn(kKeywordCases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(Validate, TooLongAndTooMany) {
  auto causes =
      Validate(SchemaWith(json::parse(R"({"type":"string","maxLength":2})")), ObjectWith("abc"));
  ASSERT_EQ(causes.size(), 1u);
  EXPECT_EQ(causes[0].field, "spec.f");
  EXPECT_EQ(causes[0].reason, "FieldValueTooLong");
  causes = Validate(SchemaWith(json::parse(R"({"type":"array","maxItems":1})")),
                    ObjectWith(json::array({1, 2})));
  ASSERT_EQ(causes.size(), 1u);
  EXPECT_EQ(causes[0].reason, "FieldValueTooMany");
}

TEST(Validate, RootRequiredAndTypeMetaAreNotChecked) {
  json schema = json::parse(R"({"type":"object","required":["spec","metadata"],
    "properties":{"metadata":{"type":"object","properties":{"name":{"type":"integer"}}},
                  "spec":{"type":"object"}}})");
  json object = {{"apiVersion", "v1"}, {"kind", "W"}, {"metadata", {{"name", "w"}}}};
  EXPECT_EQ(Messages(Validate(schema, object)), std::vector<std::string>{"spec: Required value"});
}

TEST(Validate, PatternInputIsBounded) {
  auto causes = Validate(SchemaWith(json::parse(R"({"type":"string","pattern":"^(a|b)*$"})")),
                         ObjectWith(std::string(100000, 'a')));
  ASSERT_EQ(causes.size(), 1u);
  EXPECT_NE(causes[0].message.find("longer than 4096 bytes"), std::string::npos);
  EXPECT_TRUE(Validate(SchemaWith(json::parse(R"({"type":"string","pattern":"^(a|b)*$"})")),
                       ObjectWith(std::string(4096, 'a')))
                  .empty());
}

TEST(Prune, UnknownFieldsAtEveryDepth) {
  json schema = json::parse(R"({
    "type": "object",
    "properties": {
      "spec": {"type": "object", "properties": {
        "a": {"type": "string"},
        "list": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "string"}}}},
        "map": {"type": "object", "additionalProperties": {"type": "object", "properties": {"k": {"type": "integer"}}}},
        "open": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                 "properties": {"inner": {"type": "object", "properties": {"x": {"type": "string"}}}}},
        "anymap": {"type": "object", "additionalProperties": true},
        "empty": {"type": "object"}
      }}
    }})");
  json object = json::parse(R"({
    "apiVersion": "example.com/v1", "kind": "W", "metadata": {"name": "w", "whatever": 1},
    "top": 1,
    "spec": {
      "a": "x", "b": 1,
      "list": [{"n": "1", "o": 2}, {"n": "2"}],
      "map": {"one": {"k": 1, "z": 2}},
      "open": {"free": {"deep": true}, "inner": {"x": "1", "y": 2}},
      "anymap": {"q": {"r": 1}},
      "empty": {"gone": 1}
    }})");
  std::vector<std::string> pruned = Prune(schema, object);
  EXPECT_EQ(pruned, (std::vector<std::string>{"spec.b", "spec.empty.gone", "spec.list[0].o",
                                              "spec.map.one.z", "spec.open.inner.y", "top"}));
  json expected = json::parse(R"({
    "apiVersion": "example.com/v1", "kind": "W", "metadata": {"name": "w", "whatever": 1},
    "spec": {
      "a": "x",
      "list": [{"n": "1"}, {"n": "2"}],
      "map": {"one": {"k": 1}},
      "open": {"free": {"deep": true}, "inner": {"x": "1"}},
      "anymap": {"q": {"r": 1}},
      "empty": {}
    }})");
  EXPECT_EQ(object, expected);
}

TEST(Prune, PreserveAtRootEmbeddedResourcesAndNulls) {
  json root_open = json::parse(R"({"type":"object","x-kubernetes-preserve-unknown-fields":true})");
  json object = {{"spec", {{"anything", 1}}}, {"extra", true}};
  EXPECT_TRUE(Prune(root_open, object).empty());
  EXPECT_EQ(object["extra"], true);

  json schema = json::parse(R"({"type":"object","properties":{"spec":{"type":"object","properties":{
    "template":{"type":"object","x-kubernetes-embedded-resource":true,
                "properties":{"spec":{"type":"object","properties":{"x":{"type":"string"}}}}},
    "gone":{"type":"string"},
    "maybe":{"type":"string","nullable":true}}}}})");
  json obj = json::parse(R"({"spec":{"template":{"apiVersion":"v1","kind":"Pod",
    "metadata":{"name":"p"},"spec":{"x":"1","y":2},"other":1},"gone":null,"maybe":null}})");
  EXPECT_EQ(Prune(schema, obj),
            (std::vector<std::string>{"spec.template.other", "spec.template.spec.y"}));
  EXPECT_EQ(obj, json::parse(R"({"spec":{"template":{"apiVersion":"v1","kind":"Pod",
    "metadata":{"name":"p"},"spec":{"x":"1"}},"maybe":null}})"));
}

TEST(Prune, MalformedSchemasNeverDropOrCrash) {
  json object = {{"spec", {{"a", 1}}}};
  for (const char* s : {R"(null)", R"(5)", R"("x")", R"([])", R"({"properties":"x"})",
                        R"({"properties":{"spec":7}})", R"({"properties":{"spec":{"items":3}}})"}) {
    json copy = object;
    Prune(json::parse(s), copy);
    ApplyDefaults(json::parse(s), copy);
    Validate(json::parse(s), copy);
    EXPECT_EQ(copy, object) << s;
  }
  // Deep schemas and objects: bounded recursion.
  std::string schema_text, object_text;
  for (int i = 0; i < 500; ++i) {
    schema_text += R"({"type":"object","properties":{"a":)";
    object_text += R"({"a":)";
  }
  schema_text += R"({"type":"integer","minimum":5})";
  object_text += "1";
  for (int i = 0; i < 500; ++i) {
    schema_text += "}}";
    object_text += "}";
  }
  json deep_schema = json::parse(schema_text), deep_object = json::parse(object_text);
  Prune(deep_schema, deep_object);
  ApplyDefaults(deep_schema, deep_object);
  EXPECT_TRUE(Validate(deep_schema, deep_object).empty());  // below the enforced depth
}

TEST(ApplyDefaults, FillsAbsentAndNullFieldsTopDown) {
  json schema = json::parse(R"({"type":"object","properties":{"spec":{"type":"object",
    "default": {},
    "properties":{
      "replicas":{"type":"integer","default":1},
      "mode":{"type":"string","default":"auto"},
      "keep":{"type":"string","nullable":true,"default":"d"},
      "nested":{"type":"object","default":{"x":2},"properties":{"x":{"type":"integer"},"y":{"type":"string","default":"y"}}},
      "list":{"type":"array","items":{"type":"object","properties":{"p":{"type":"integer","default":80}}}},
      "map":{"type":"object","additionalProperties":{"type":"object","properties":{"v":{"type":"boolean","default":true}}}}
    }}}})");
  json object = json::parse(R"({"apiVersion":"v1","kind":"W","metadata":{"name":"w"},
    "spec":{"mode":null,"keep":null,"list":[{},{"p":1}],"map":{"a":{},"b":{"v":false}}}})");
  ApplyDefaults(schema, object);
  EXPECT_EQ(object["spec"], json::parse(R"({"replicas":1,"mode":"auto","keep":null,
    "nested":{"x":2,"y":"y"},"list":[{"p":80},{"p":1}],"map":{"a":{"v":true},"b":{"v":false}}})"));

  json empty = {{"apiVersion", "v1"}};
  ApplyDefaults(schema, empty);
  EXPECT_EQ(empty["spec"]["replicas"], 1);
}

TEST(ParseFieldValidation, Values) {
  EXPECT_EQ(*ParseFieldValidation(""), FieldValidation::kWarn);
  EXPECT_EQ(*ParseFieldValidation("Warn"), FieldValidation::kWarn);
  EXPECT_EQ(*ParseFieldValidation("Ignore"), FieldValidation::kIgnore);
  EXPECT_EQ(*ParseFieldValidation("Strict"), FieldValidation::kStrict);
  absl::StatusOr<FieldValidation> bad = ParseFieldValidation("strict");
  EXPECT_EQ(kube::HttpCode(bad.status()), 400);
}

json WidgetSchema() {
  return json::parse(R"({"type":"object","properties":{"spec":{"type":"object",
    "required":["size"],"properties":{"size":{"type":"integer","minimum":0},
    "color":{"type":"string","default":"red"}}}}})");
}

TEST(PrepareCustomResource, FieldValidationModes) {
  const json input = json::parse(R"({"apiVersion":"example.com/v1","kind":"Widget",
    "metadata":{"name":"w"},"spec":{"size":1,"foo":1,"bar":{"x":1}}})");
  const json expected = json::parse(R"({"apiVersion":"example.com/v1","kind":"Widget",
    "metadata":{"name":"w"},"spec":{"size":1,"color":"red"}})");

  json o = input;
  auto r =
      PrepareCustomResource(WidgetSchema(), "example.com", "Widget", FieldValidation::kIgnore, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->empty());
  EXPECT_EQ(o, expected);

  o = input;
  r = PrepareCustomResource(WidgetSchema(), "example.com", "Widget", FieldValidation::kWarn, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(
      *r, (std::vector<std::string>{R"(unknown field "spec.bar")", R"(unknown field "spec.foo")"}));
  EXPECT_EQ(o, expected);

  o = input;
  r = PrepareCustomResource(WidgetSchema(), "example.com", "Widget", FieldValidation::kStrict, o);
  EXPECT_EQ(kube::HttpCode(r.status()), 400);
  EXPECT_EQ(r.status().message(),
            R"(strict decoding error: unknown field "spec.bar", unknown field "spec.foo")");

  // Strict with nothing unknown passes.
  o = expected;
  r = PrepareCustomResource(WidgetSchema(), "example.com", "Widget", FieldValidation::kStrict, o);
  EXPECT_TRUE(r.ok()) << r.status();
}

TEST(PrepareCustomResource, InvalidObjectIs422WithCauses) {
  json o = json::parse(R"({"apiVersion":"example.com/v1","kind":"Widget",
    "metadata":{"name":"w"},"spec":{"size":-1}})");
  auto r =
      PrepareCustomResource(WidgetSchema(), "example.com", "Widget", FieldValidation::kWarn, o);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(kube::IsInvalid(r.status()));
  EXPECT_EQ(kube::HttpCode(r.status()), 422);
  EXPECT_EQ(r.status().message(),
            "Widget.example.com \"w\" is invalid: spec.size: Invalid value: -1: spec.size in body "
            "should be greater than or equal to 0");
  o = json::parse(R"({"metadata":{"name":"w"},"spec":{}})");
  r = PrepareCustomResource(WidgetSchema(), "example.com", "Widget", FieldValidation::kWarn, o);
  ASSERT_EQ(kube::Details(r.status()).causes.size(), 1u);
  EXPECT_EQ(kube::Details(r.status()).causes[0].field, "spec.size");
  EXPECT_EQ(kube::Details(r.status()).causes[0].reason, "FieldValueRequired");

  json any = {{"spec", {{"x", 1}}}};
  EXPECT_TRUE(
      PrepareCustomResource(nullptr, "example.com", "Widget", FieldValidation::kStrict, any).ok());
}

}  // namespace
}  // namespace ctrlhost::apiserver::openapi
