// ResolveOperatorFiles and LoadOperators on real files and directories: sorting, skipped files,
// names unique across files, every file's errors, path errors, escaped file names. The parsing
// of one text is load_test.cc's.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/config/load.h"

namespace ctrlhost::config {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

class LoadOperatorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(std::getenv("TEST_TMPDIR")) /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  static std::string Doc(absl::string_view name) {
    return absl::StrCat("apiVersion: ctrlhost.dev/v1alpha1\nkind: Operator\nmetadata:\n  name: ",
                        name, "\nspec:\n  plugins: [{name: p, exec: {command: p}}]\n");
  }
  std::filesystem::path dir_;
};

TEST_F(LoadOperatorsTest, FileWithSeveralDocuments) {
  const std::string path = Write("ops.yaml", absl::StrCat(Doc("a"), "---\n", Doc("b")));
  absl::StatusOr<std::vector<OperatorSpec>> ops = LoadOperators(path);
  ASSERT_TRUE(ops.ok()) << ops.status();
  ASSERT_EQ(ops->size(), 2u);
  EXPECT_EQ((*ops)[1].location.ToString(), absl::StrCat(path, ":8:1"));
}

TEST_F(LoadOperatorsTest, DirectoryIsSortedAndSkipsOtherFiles) {
  Write("b.yml", Doc("second"));
  Write("a.yaml", Doc("first"));
  Write("notes.txt", "not yaml: [");
  std::filesystem::create_directories(dir_ / "sub.yaml");  // a directory: not read
  Write("sub.yaml/c.yaml", Doc("nested"));
  absl::StatusOr<std::vector<OperatorSpec>> ops = LoadOperators(dir_.string());
  ASSERT_TRUE(ops.ok()) << ops.status();
  ASSERT_EQ(ops->size(), 2u);
  EXPECT_EQ((*ops)[0].name, "first");
  EXPECT_EQ((*ops)[1].name, "second");
  EXPECT_THAT(*ResolveOperatorFiles(dir_.string()),
              ElementsAre((dir_ / "a.yaml").string(), (dir_ / "b.yml").string()));
}

TEST_F(LoadOperatorsTest, DuplicateNamesAcrossFilesAreRefused) {
  const std::string a = Write("a.yaml", Doc("web"));
  const std::string b = Write("b.yaml", absl::StrCat("# comment\n", Doc("web")));
  absl::StatusOr<std::vector<OperatorSpec>> ops = LoadOperators(dir_.string());
  ASSERT_FALSE(ops.ok());
  EXPECT_EQ(
      ops.status().message(),
      absl::StrCat(b, ":2:1: metadata.name: operator \"web\" is already defined at ", a, ":1:1"));
}

TEST_F(LoadOperatorsTest, ErrorsOfEveryFileAreReported) {
  Write("a.yaml", absl::StrCat(Doc("a"), "  bogus: 1\n"));
  Write("b.yaml", "kind: [\n");
  absl::StatusOr<std::vector<OperatorSpec>> ops = LoadOperators(dir_.string());
  ASSERT_FALSE(ops.ok());
  EXPECT_THAT(ops.status().message(), HasSubstr("a.yaml:7:3: spec.bogus: unknown field"));
  EXPECT_THAT(ops.status().message(), HasSubstr("b.yaml:"));
}

TEST_F(LoadOperatorsTest, PathErrors) {
  EXPECT_EQ(LoadOperators((dir_ / "missing").string()).status().code(),
            absl::StatusCode::kNotFound);
  absl::Status empty = LoadOperators(dir_.string()).status();
  EXPECT_EQ(empty.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(empty.message(), HasSubstr("no .yaml or .yml files"));
  EXPECT_EQ(ResolveOperatorFiles("/dev/null").status().code(), absl::StatusCode::kInvalidArgument);
  if (geteuid() != 0) {  // root reads everything
    const std::string locked = Write("locked.yaml", Doc("x"));
    chmod(locked.c_str(), 0);
    EXPECT_EQ(LoadOperators(locked).status().code(), absl::StatusCode::kPermissionDenied);
    EXPECT_EQ(ResolveOperatorFiles(dir_.string()).status().code(),
              absl::StatusCode::kPermissionDenied);
  }
}

// Regression: an empty operator file was accepted (and ran nothing).
TEST_F(LoadOperatorsTest, RegressionFileWithoutOperatorsIsRefused) {
  for (const char* text : {"", "\n", "# only a comment\n", "---\n---\n"}) {
    const std::string path = Write("empty.yaml", text);
    absl::Status status = LoadOperators(path).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_EQ(
        status.message(),
        absl::StrCat(path, ": no Operator document (the file is empty or holds only comments)"));
  }
  // In a directory too: each file must hold an operator.
  Write("a.yaml", Doc("a"));
  EXPECT_THAT(LoadOperators(dir_.string()).status().message(),
              HasSubstr("empty.yaml: no Operator"));
  // An invalid file says why, not that it is empty.
  const std::string bad = Write("empty.yaml", "kind: [\n");
  EXPECT_THAT(LoadOperators(bad).status().message(), Not(HasSubstr("no Operator document")));
}

// Regression (attack run, item 4): an operator-file name with invalid UTF-8 was echoed as raw
// bytes in every message that names it (errors, "no Operator document", path errors).
TEST_F(LoadOperatorsTest, RegressionInvalidUtf8FileNameIsEscaped) {
  const std::string escaped_dir = absl::StrCat(dir_.string(), "/caf\\xe9\\ndir");
  std::filesystem::create_directories(dir_ / "caf\xe9\ndir");
  const std::string bad = Write("caf\xe9\ndir/bad\xff.yaml", "kind: [\n");
  absl::Status status = LoadOperators(bad).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr(absl::StrCat(escaped_dir, "/bad\\xff.yaml:")));
  EXPECT_THAT(status.message(), Not(HasSubstr("\xff")));
  EXPECT_THAT(status.message(), Not(HasSubstr("\n")));

  const std::string empty = Write("caf\xe9\ndir/empty\xff.yaml", "# nothing\n");
  EXPECT_EQ(LoadOperators(empty).status().message(),
            absl::StrCat(escaped_dir,
                         "/empty\\xff.yaml: no Operator document (the file is empty or holds "
                         "only comments)"));

  absl::Status missing = LoadOperators(absl::StrCat(dir_.string(), "/gone\xff.yaml")).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.message(),
            absl::StrCat("\"", dir_.string(), "/gone\\xff.yaml\": no such file or directory"));

  // A valid file under that name loads; its location (used in messages) is escaped too.
  const std::string good = Write("caf\xe9\ndir/good\xff.yaml", Doc("a"));
  absl::StatusOr<std::vector<OperatorSpec>> ops = LoadOperators(good);
  ASSERT_TRUE(ops.ok()) << ops.status();
  EXPECT_EQ((*ops)[0].location.ToString(), absl::StrCat(escaped_dir, "/good\\xff.yaml:1:1"));
}

}  // namespace
}  // namespace ctrlhost::config
