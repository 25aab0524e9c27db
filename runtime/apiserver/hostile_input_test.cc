// Regression tests for hostile input from a token holder, driven through
// ApiHandlers::Handle(): every bad body is a 4xx Status, never a crash or an unbounded
// allocation, and nothing is persisted.
#include <sqlite3.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/apiserver/body_limits.h"
#include "runtime/apiserver/testing/api_test_env.h"

namespace ctrlhost::apiserver {
namespace {

using ::ctrlhost::apiserver::testing::ApiTestEnv;
using ::ctrlhost::apiserver::testing::ExpectStatus;
using ::testing::HasSubstr;

constexpr char kCms[] = "/api/v1/namespaces/ns1/configmaps";

std::string Message(const ApiResponse& r) { return ApiTestEnv::Json(r).value("message", ""); }

std::string Nested(int levels) {
  return R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"deep"},"x":)" +
         std::string(levels, '[') + std::string(levels, ']') + "}";
}

class HostileInputTest : public ::testing::Test {
 protected:
  void SetUp() override { env_.CreateNamespace("ns1"); }
  ApiTestEnv env_;
};

// Issue 14 item 1: 15,000 levels of nested JSON in a create body overflowed the stack.
TEST_F(HostileInputTest, RegressionFifteenThousandLevelsInACreateBodyIs400) {
  ApiResponse r = env_.Post(kCms, Nested(15000));
  ExpectStatus(r, 400, "BadRequest");
  EXPECT_THAT(Message(r), HasSubstr("nested too deeply (more than 1000 levels)"));
  ExpectStatus(env_.Get(std::string(kCms) + "/deep"), 404, "NotFound");
}

TEST_F(HostileInputTest, DeepBodiesOfEveryVerbAndFormatAre400) {
  env_.CreateConfigMap("ns1", "a");
  const std::string path = std::string(kCms) + "/a";
  ExpectStatus(env_.Do("PUT", path, Nested(15000)), 400, "BadRequest");
  const std::string deep_yaml =
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\nx: " + std::string(15000, '[') +
      std::string(15000, ']') + "\n";
  ExpectStatus(env_.Do("POST", kCms, deep_yaml, "application/yaml"), 400, "BadRequest");
  ExpectStatus(env_.Patch(path, "application/apply-patch+yaml", deep_yaml, {{"fieldManager", "m"}}),
               400, "BadRequest");
  ExpectStatus(env_.Patch(path, "application/merge-patch+json", Nested(15000)), 400, "BadRequest");
  ExpectStatus(
      env_.Delete(path, {}, "{\"x\":" + std::string(15000, '[') + std::string(15000, ']') + "}"),
      400, "BadRequest");
  // Exactly at the limit is fine for the parser (the object is then an ordinary ConfigMap
  // with an unknown field).
  EXPECT_LT(env_.Post(kCms, Nested(kMaxNestingDepth - 1)).code, 500);
}

// Issue 14 item 2: 41 operations (add, then 40 copies into itself) grew RSS 0.5 -> 6 GB.
TEST_F(HostileInputTest, RegressionJsonPatchCopyBombIs413AndChangesNothing) {
  nlohmann::json before = env_.CreateConfigMap("ns1", "a");
  nlohmann::json ops = nlohmann::json::array();
  ops.push_back({{"op", "add"}, {"path", "/metadata/annotations"}, {"value", {{"k", "v"}}}});
  ops.push_back({{"op", "add"}, {"path", "/data"}, {"value", nlohmann::json::array({"x"})}});
  for (int i = 0; i < 40; ++i) {
    ops.push_back({{"op", "copy"}, {"from", "/data"}, {"path", "/data/-"}});
  }
  ApiResponse r = env_.Patch(std::string(kCms) + "/a", "application/json-patch+json", ops.dump());
  ExpectStatus(r, 413, "RequestEntityTooLarge");
  EXPECT_THAT(Message(r), HasSubstr("would grow the object by more than"));
  nlohmann::json after = ApiTestEnv::Json(env_.Get(std::string(kCms) + "/a"));
  EXPECT_EQ(after["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"]);
}

// A stored object may not grow past kMaxObjectBytes through repeated merge patches.
TEST_F(HostileInputTest, ObjectsCannotGrowPastTheLimitThroughPatches) {
  env_.CreateConfigMap("ns1", "a", nlohmann::json::object(),
                       {{"big", std::string(kMaxObjectBytes - (512 << 10), 'x')}});
  nlohmann::json patch = {{"data", {{"more", std::string(1 << 20, 'y')}}}};
  ApiResponse r =
      env_.Patch(std::string(kCms) + "/a", "application/merge-patch+json", patch.dump());
  ExpectStatus(r, 413, "RequestEntityTooLarge");
  EXPECT_THAT(Message(r), HasSubstr("bytes a stored object may have"));
}

// Issue 14 item 3: a 600-byte YAML body of nested aliases grew RSS to 6 GB.
TEST_F(HostileInputTest, RegressionYamlBillionLaughsIs400) {
  std::string yaml =
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lol}\nl0: &l0 "
      "[lol,lol,lol,lol,lol,lol,lol,lol,lol]\n";
  for (int i = 1; i < 10; ++i) {
    yaml += "l" + std::to_string(i) + ": &l" + std::to_string(i) + " [";
    for (int k = 0; k < 9; ++k) yaml += (k ? ",*l" : "*l") + std::to_string(i - 1);
    yaml += "]\n";
  }
  ApiResponse r = env_.Do("POST", kCms, yaml, "application/yaml");
  ExpectStatus(r, 400, "BadRequest");
  EXPECT_THAT(Message(r), HasSubstr("expands to too many nodes"));
  ExpectStatus(env_.Patch(std::string(kCms) + "/lol", "application/apply-patch+yaml", yaml,
                          {{"fieldManager", "m"}}),
               400, "BadRequest");
}

// Issue 14 item 9: 1e400 was a 500 with no reason.
TEST_F(HostileInputTest, RegressionNumberOutOfRangeIs400) {
  ApiResponse r = env_.Post(
      kCms,
      std::string(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"n"},"x":1e400})"));
  ExpectStatus(r, 400, "BadRequest");
  EXPECT_THAT(Message(r), HasSubstr("1e400"));
}

// Issue 14 item 9: ?dryRun=Bogus created the object.
TEST_F(HostileInputTest, RegressionUnknownDryRunValueIs400AndPersistsNothing) {
  const std::string body = R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"d"}})";
  ApiResponse r = env_.Do("POST", kCms, body, "application/json", {{"dryRun", "Bogus"}});
  ExpectStatus(r, 400, "BadRequest");
  EXPECT_THAT(Message(r), HasSubstr("dryRun: Unsupported value: \"Bogus\""));
  ExpectStatus(env_.Get(std::string(kCms) + "/d"), 404, "NotFound");
  env_.CreateConfigMap("ns1", "e");
  const std::string e = std::string(kCms) + "/e";
  ExpectStatus(
      env_.Do("PUT", e,
              R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"e"},"data":{"a":"b"}})",
              "application/json", {{"dryRun", "all"}}),
      400, "BadRequest");
  ExpectStatus(
      env_.Patch(e, "application/merge-patch+json", R"({"data":{"a":"b"}})", {{"dryRun", "true"}}),
      400, "BadRequest");
  ExpectStatus(env_.Delete(e, {{"dryRun", "Al"}}), 400, "BadRequest");
  ExpectStatus(env_.Delete(e, {}, R"({"dryRun":["Bogus"]})"), 400, "BadRequest");
  EXPECT_EQ(env_.Get(e).code, 200);
  EXPECT_FALSE(ApiTestEnv::Json(env_.Get(e)).value("data", nlohmann::json::object()).contains("a"));
  EXPECT_EQ(env_.Do("POST", kCms, body, "application/json", {{"dryRun", "All"}}).code, 201);
  ExpectStatus(env_.Get(std::string(kCms) + "/d"), 404, "NotFound");
}

// Issue 14 item 9: duplicate keys were accepted silently. The last value wins (Go's decoder);
// like kube-apiserver 1.25+, a warning by default and 400 with fieldValidation=Strict.
TEST_F(HostileInputTest, RegressionDuplicateJsonFieldsWarnOrAreRefusedWhenStrict) {
  const std::string body =
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dup"},"data":{"a":"1","a":"2"}})";
  ApiResponse strict =
      env_.Do("POST", kCms, body, "application/json", {{"fieldValidation", "Strict"}});
  ExpectStatus(strict, 400, "BadRequest");
  EXPECT_THAT(Message(strict), HasSubstr("duplicate field \"data.a\""));
  ApiResponse warn = env_.Do("POST", kCms, body);
  ASSERT_EQ(warn.code, 201) << warn.body;
  EXPECT_EQ(ApiTestEnv::Json(warn)["data"]["a"], "2");
  bool warned = false;
  for (const auto& [name, value] : warn.headers) {
    if (name == "Warning" && value.find("duplicate field \\\"data.a\\\"") != std::string::npos) {
      warned = true;
    }
  }
  EXPECT_TRUE(warned);
}

// Issue 14 item 9: a namespace "inside" a namespace was served as the namespace.
TEST_F(HostileInputTest, RegressionNamespaceUnderANamespacePathIs404) {
  ExpectStatus(env_.Get("/api/v1/namespaces/ns1/namespaces/ns1"), 404, "NotFound");
  EXPECT_EQ(env_.Get("/api/v1/namespaces/ns1").code, 200);
}

// Issue 14 item 9: invalid UTF-8 in a YAML body silently became U+FFFD.
TEST_F(HostileInputTest, RegressionInvalidUtf8InYamlIs400) {
  const std::string yaml =
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: u}\ndata: {k: \"a\xff\xfe\"}\n";
  ApiResponse r = env_.Do("POST", kCms, yaml, "application/yaml");
  ExpectStatus(r, 400, "BadRequest");
  EXPECT_THAT(Message(r), HasSubstr("UTF-8"));
  ExpectStatus(env_.Get(std::string(kCms) + "/u"), 404, "NotFound");
}

// Issue 14 item 10: a flipped byte inside a stored value made LISTs of its namespace
// unparseable for clients. It is now answered with a clear 500 naming the key.
TEST(CorruptStorageTest, RegressionFlippedByteIs500NamingTheKeyNeverBrokenJson) {
  std::string dir;
  {
    ApiTestEnv env;
    env.CreateNamespace("ns1");
    env.CreateConfigMap("ns1", "c", nlohmann::json::object(), {{"k", "MARKER"}});
    env.CreateConfigMap("ns1", "d");
    dir = env.dir();
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir + "/state.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "UPDATE log SET value = CAST(replace(CAST(value AS TEXT), '\"MARKER\"', "
                         "'\"MARKER') AS BLOB)",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  ASSERT_GT(sqlite3_changes(db), 0);
  sqlite3_close(db);

  testing::ApiTestEnvOptions options;
  options.dir = dir;
  ApiTestEnv env(options);
  ApiResponse get = env.Get(std::string(kCms) + "/c");
  ExpectStatus(get, 500, "InternalError");
  EXPECT_THAT(Message(get), HasSubstr("/ns1/c is corrupt"));
  ApiResponse list = env.Get(kCms);
  ExpectStatus(list, 500, "InternalError");
  EXPECT_THAT(Message(list), HasSubstr("/ns1/c is corrupt"));
  ExpectStatus(env.Patch(std::string(kCms) + "/c", "application/merge-patch+json", "{}"), 500,
               "InternalError");
  EXPECT_EQ(env.Get(std::string(kCms) + "/d").code, 200);
  // Deleting the corrupt object repairs the namespace.
  EXPECT_EQ(env.Delete(std::string(kCms) + "/c").code, 200);
  EXPECT_EQ(env.Get(kCms).code, 200);
}

}  // namespace
}  // namespace ctrlhost::apiserver
