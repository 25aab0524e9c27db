"""tools/internal/source_length.py on small fixtures, with the limits scaled down: it finds each
kind of function clang-format leaves (free, out-of-class member, in-class, constructor with an
initializer list, operator, TEST_F, a lambda variable), counts a nested lambda toward its
function, flags a long file and a long function, and does not flag a long comment block, a long
data table, braces inside strings or comments, or a class body."""

import textwrap
import unittest

from tools.internal import bazel_unittest
from tools.internal import source_length


def cc(text):
    return textwrap.dedent(text).lstrip("\n")


def body(n, indent="  "):
    """n statement lines."""
    return "".join("%sx += %d;\n" % (indent, i) for i in range(n))


class FindFunctionsTest(unittest.TestCase):

    def names_and_spans(self, text):
        return [(f.name, f.first_line, f.last_line) for f in source_length.find_functions(text)]

    def test_free_member_and_multiline_signatures(self):
        text = cc("""
            namespace ctrlhost::x {
            namespace {

            int Twice(int x) {
              return 2 * x;
            }

            }  // namespace

            absl::StatusOr<std::unique_ptr<Host>> Host::Start(const HostOptions& options,
                                                              Clock* clock) {
              if (x) {
                return 1;
              }
              return 2;
            }

            }  // namespace ctrlhost::x
            """)
        self.assertEqual(self.names_and_spans(text), [("Twice", 4, 6), ("Host::Start", 10, 16)])

    def test_class_members_constructors_and_operators(self):
        text = cc("""
            template <typename T>
            class Box final : public Base<T> {
             public:
              explicit Box(T v) : v_(v), n_{1}, w_{.a = 1} {
                Init();
              }
              T get() const ABSL_LOCKS_EXCLUDED(mu_) { return v_; }
              bool operator==(const Box& o) const { return v_ == o.v_; }
              void operator()() {}

             private:
              struct Inner {
                int Size() const { return 1; }
              };
              enum class Kind { kA, kB };
              std::atomic<int> n_{0};
              T v_;
            };

            Box::~Box() {}
            """)
        self.assertEqual(self.names_and_spans(text), [
            ("Box", 4, 6),
            ("get", 7, 7),
            ("operator==", 8, 8),
            ("operator()", 9, 9),
            ("Size", 13, 13),
            ("Box::~Box", 20, 20),
        ])

    def test_tests_and_lambdas(self):
        text = cc("""
            TEST_F(ValidateTest, NamesTheItem) {
              auto check = [&](int x) {
                if (x) {
                  return 1;
                }
                return 0;
              };
              EXPECT_EQ(check(1), 1);
            }

            const auto kHandler = [](const Request& r) {
              return r.ok();
            };

            INSTANTIATE_TEST_SUITE_P(All, P, ::testing::Values(Case{1}, Case{2}),
                                     [](const auto& info) { return info.name; });
            """)
        self.assertEqual(self.names_and_spans(text), [
            ("TEST_F(ValidateTest, NamesTheItem)", 1, 9),
            ("kHandler", 11, 13),
        ])

    def test_braces_in_strings_comments_and_preprocessor_are_text(self):
        text = cc('''
            // A comment with an opening brace {
            /* and { another
               } */
            #define OPEN {
            const char* kRaw = R"json({"a": {"b": "}"}})json";
            int F() {
              char c = '{';
              const char* s = "}\\"{";
              int million = 1'000'000;
              return c + s[0] + million;  // }
            }
            ''')
        self.assertEqual(self.names_and_spans(text), [("F", 6, 11)])

    def test_data_tables_are_not_functions(self):
        text = cc("""
            struct Case {
              const char* name;
              int want;
            };

            const Case kCases[] = {
                {"a", 1},
                {"b", 2},
            };

            const std::map<std::string, int> kByName{
                {"a", 1},
            };
            """)
        self.assertEqual(self.names_and_spans(text), [])


class CheckFileTest(unittest.TestCase):

    def test_flags_a_long_function_with_its_line_and_length(self):
        text = "int Short() {\n" + body(3) + "}\n\nvoid Long(int x) {\n" + body(10) + "}\n"
        findings = source_length.check_file("runtime/a.cc", text, max_file_lines=100,
                                            max_function_lines=10)
        self.assertEqual([str(f) for f in findings],
                         ["runtime/a.cc:7: function Long is 12 lines (limit 10)"])

    def test_a_function_at_the_limit_passes(self):
        text = "void Fits() {\n" + body(8) + "}\n"
        self.assertEqual(source_length.check_file("a.cc", text, 100, 10), [])

    def test_a_nested_lambda_counts_toward_its_function(self):
        text = ("TEST(Suite, Name) {\n  auto f = [&] {\n" + body(8, "    ") + "  };\n  f();\n}\n")
        findings = source_length.check_file("a_test.cc", text, 100, 10)
        self.assertEqual([str(f) for f in findings],
                         ["a_test.cc:1: function TEST(Suite, Name) is 13 lines (limit 10)"])

    def test_flags_a_long_file(self):
        text = "int F() {\n  return 1;\n}\n" + "\n" * 20
        findings = source_length.check_file("runtime/b.h", text, max_file_lines=20,
                                            max_function_lines=10)
        self.assertEqual([str(f) for f in findings],
                         ["runtime/b.h:1: file is 23 lines (limit 20)"])

    def test_a_long_comment_block_is_no_function(self):
        text = ("// Overview.\n" + "// More words.\n" * 30 + "/*\n" + " * {\n" * 30 + " */\n" +
                "int F() { return 1; }\n")
        self.assertEqual(source_length.check_file("c.h", text, 100, 10), [])

    def test_a_long_string_table_is_no_function(self):
        text = ('const char* const kLines[] = {\n' + '    "{ a line",\n' * 30 + '};\n\n' +
                'const Case kCases[] = {\n' + '    {"x", {1, 2}},\n' * 30 + '};\n')
        self.assertEqual(source_length.check_file("d.cc", text, 100, 10), [])

    def test_unbalanced_braces_do_not_raise(self):
        self.assertEqual(source_length.check_file("e.cc", "void F() {\n  {\n", 100, 10), [])


if __name__ == "__main__":
    bazel_unittest.main()
