"""The length limits of the C++ sources under runtime/: files and function bodies.

A file past MAX_FILE_LINES lines, or a function past MAX_FUNCTION_LINES, is a sign that it holds
more than one concept (CONVENTIONS.md: one concept per file pair); split it along its
responsibilities. //tools/internal:runtime_source_length_test applies these limits to every .cc
and .h under runtime/.

    for finding in source_length.check_file("runtime/x/y.cc", text):
        print(finding)  # runtime/x/y.cc:12: function Foo::Bar is 130 lines (limit 120)

What counts as a function: every definition with a body at namespace or class scope, as
clang-format (Google style) leaves them: free functions, out-of-class and in-class member
functions, constructors (with their initializer lists), operators, TEST / TEST_F / TEST_P bodies
and other macro-headed blocks such as `TEST(Suite, Name) {`, and a lambda assigned to a
namespace-scope variable. A lambda or local class inside a function counts toward that function.
A function's length runs from the first line of its declaration (its template<> line, not the
comment above it) to the line of its closing brace, inclusive.

What does not count: comments and string literals (a brace inside them is text, raw strings
included), preprocessor lines, class, struct, enum and namespace bodies themselves, and data
tables: a brace initializer at namespace or class scope (`const Case kCases[] = {...};`,
`std::vector<T> v{...};`). A table of cases is the cure for a long test function, not a long
function; the file limit still bounds it.

Guarantees: findings come in file order, each naming file:line, what, and its length; a file that
does not parse as expected (unbalanced braces) yields no function finding beyond what was closed
properly, never an exception.
Assumptions: the source is clang-formatted C++17; no macro hides an unbalanced brace.
"""

import re

MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 120


class Finding:
    """One violation: a file too long (name is None) or a function too long."""

    def __init__(self, path, line, name, length, limit):
        self.path = path
        self.line = line
        self.name = name
        self.length = length
        self.limit = limit

    def __str__(self):
        if self.name is None:
            return "%s:%d: file is %d lines (limit %d)" % (self.path, self.line, self.length,
                                                           self.limit)
        return "%s:%d: function %s is %d lines (limit %d)" % (self.path, self.line, self.name,
                                                              self.length, self.limit)

    def __repr__(self):
        return "Finding(%r)" % str(self)


class Function:
    """A function definition found in a source: its name and first and last lines (1-based)."""

    def __init__(self, name, first_line, last_line):
        self.name = name
        self.first_line = first_line
        self.last_line = last_line

    @property
    def length(self):
        return self.last_line - self.first_line + 1

    def __repr__(self):
        return "Function(%r, %d, %d)" % (self.name, self.first_line, self.last_line)


def count_lines(text):
    """Lines as `wc -l` counts them, plus a last line without a newline."""
    return len(text.splitlines())


def blank_out(text):
    """The text with comments, string and character literals and preprocessor lines replaced by
    spaces, keeping every newline, so that braces and line numbers can be read off it."""
    out = []
    i = 0
    n = len(text)
    line_start = True  # only whitespace since the last newline
    while i < n:
        c = text[i]
        if c == "\n":
            out.append(c)
            line_start = True
            i += 1
            continue
        if line_start and c == "#":
            # A preprocessor directive, with its backslash continuations.
            j = i
            while j < n and text[j] != "\n":
                if text[j] == "\\" and j + 1 < n and text[j + 1] == "\n":
                    j += 2
                    continue
                j += 1
            out.append(_spaces(text[i:j]))
            i = j
            continue
        if not c.isspace():
            line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(_spaces(text[i:j]))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(_spaces(text[i:j]))
            i = j
        elif c == '"':
            j = _raw_string_end(text, i)
            if j is None:
                j = _quoted_end(text, i, '"')
            out.append(_spaces(text[i:j]))
            i = j
        elif c == "'" and not _is_digit_separator(text, i):
            j = _quoted_end(text, i, "'")
            out.append(_spaces(text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _spaces(s):
    return re.sub(r"[^\n]", " ", s)


def _quoted_end(text, i, quote):
    """The index just past the literal opened by text[i] == quote (stops at a raw newline)."""
    j = i + 1
    while j < len(text):
        if text[j] == "\\":
            j += 2
            continue
        if text[j] == quote or text[j] == "\n":
            return j + 1
        j += 1
    return len(text)


def _raw_string_end(text, i):
    """For R"delim( ... )delim" (with any u8/u/U/L prefix) opened at text[i] == '"', the index
    just past it; None when text[i] does not open a raw string."""
    if i == 0 or text[i - 1] != "R" or (i >= 2 and (text[i - 2].isalnum() and
                                                   text[i - 2] not in "8uUL")):
        return None
    m = re.match(r'"([^()\\\s]{0,16})\(', text[i:])
    if not m:
        return None
    close = ")" + m.group(1) + '"'
    j = text.find(close, i + m.end())
    return len(text) if j < 0 else j + len(close)


def _is_digit_separator(text, i):
    """Whether the ' at text[i] separates digits of a number (1'000'000), not a char literal."""
    j = i
    while j > 0 and (text[j - 1].isalnum() or text[j - 1] in "'."):
        j -= 1
    return j < i and text[j].isdigit()


# What may follow the closing parenthesis of a function's parameters before its body, one
# qualifier at a time (a single regex with nested repetition backtracks exponentially).
_QUALIFIER = re.compile(r"\s*(const|volatile|noexcept(\s*\([^()]*\))?|override|final|mutable|&&|&|"
                        r"constexpr|->\s*[^{;=]+$|[A-Z][A-Z0-9_]*(\s*\([^()]*\))?)")


def _only_qualifiers(after):
    """Whether `after` (starting at the parameters' ')') holds only qualifiers."""
    rest = after[1:]
    while rest.strip():
        m = _QUALIFIER.match(rest)
        if not m or m.end() == 0:
            return False
        rest = rest[m.end():]
    return True


_CONTAINER = re.compile(r"^(inline\s+)?(namespace\b|extern\b)")
_CLASS = re.compile(r"^(template\s*<.*>\s*)?(class|struct|union)\b")
_ENUM = re.compile(r"^(typedef\s+)?enum\b")


def _classify(head):
    """What a `{` opened at namespace or class scope starts, from the declaration before it
    (blanked, whitespace-collapsed, no access label): 'container' for a namespace or class body,
    'function', 'initializer' for a constructor's member brace initializer, or 'data'."""
    head = re.sub(r"^((public|private|protected)\s*:\s*)+", "", head)
    if _CONTAINER.match(head):
        return "container"
    if _ENUM.match(head):
        return "data"
    if _CLASS.match(head) and not _function_head(head):
        return "container"
    if _function_head(head):
        return "function"
    if _constructor_initializer(head):
        return "initializer"
    return "data"


def _operatorless(head):
    # operator=, operator(), operator< ... must not read as an initializer or template.
    return re.sub(r"\boperator\s*(\(\s*\)|\[\s*\]|[^\s(]+)", "operator@", head)


def _split_at_params(head):
    """(declarator, rest) around the first top-level '(' of head, or None when there is none or
    an '=' before it makes the head a variable's initializer."""
    head = _operatorless(head)
    angle = 0
    for i, c in enumerate(head):
        if c == "<":
            angle += 1
        elif c == ">" and angle > 0:
            angle -= 1
        elif c == "=" and angle == 0:
            return None
        elif c == "(" and angle == 0:
            return head[:i], head[i:]
    return None


def _matching_paren(s, i):
    depth = 0
    for j in range(i, len(s)):
        if s[j] == "(":
            depth += 1
        elif s[j] == ")":
            depth -= 1
            if depth == 0:
                return j
    return None


def _function_head(head):
    split = _split_at_params(head)
    if split is None:
        return _lambda_variable(head) is not None
    _, rest = split
    close = _matching_paren(rest, 0)
    if close is None:
        return False
    after = rest[close:]
    if _only_qualifiers(after):
        return True
    # A constructor with an initializer list: `) : a_(x), b_{y}` ends with ')' or '}'.
    return re.match(r"^\)\s*(noexcept\s*)?:[^:]", after) is not None and after.rstrip()[-1] in ")}"


def _constructor_initializer(head):
    """A `{` after `Foo::Foo(...) : member_` (brace-initializing a member)."""
    split = _split_at_params(head)
    if split is None:
        return False
    _, rest = split
    close = _matching_paren(rest, 0)
    return close is not None and re.match(r"^\)\s*(noexcept\s*)?:[^:]", rest[close:]) is not None


def _lambda_variable(head):
    m = re.match(r"^(.*?)(\w+)\s*=\s*\[[^\]]*\]\s*(\(.*\))?[^=]*$", head)
    return m.group(2) if m else None


def _function_name(head):
    head = re.sub(r"^((public|private|protected)\s*:\s*)+", "", head)
    lam = _lambda_variable(head) if _split_at_params(head) is None else None
    if lam:
        return lam
    split = _split_at_params(head)
    declarator, rest = split
    m = re.search(r"([~\w:]+|operator@)\s*$", declarator)
    name = m.group(1) if m else declarator.strip()
    if re.fullmatch(r"[A-Z][A-Z0-9_]*", name) and declarator.strip() == name:  # TEST_F(S, N)
        close = _matching_paren(rest, 0)
        return name + re.sub(r"\s+", " ", rest[:close + 1])
    if name.endswith("operator@"):
        op = re.search(r"\boperator\s*(\(\s*\)|\[\s*\]|[^\s(]+)", head)
        name = name[:-1] + (op.group(1) if op else "")
    return name


def find_functions(text):
    """The function definitions in a C++ source, in order of their closing braces."""
    code = blank_out(text)
    functions = []
    # Each scope: [kind, head-or-name, first line]. Kinds 'container' (namespace, class: look for
    # functions inside), 'function', 'initializer' (a member brace-init in a constructor's
    # initializer list), 'block' (anything nested in a function or in data).
    stack = []
    head = []  # characters of the declaration being read at container scope
    head_line = None  # line where that declaration starts
    parens = 0
    line = 1
    for c in code:
        if c == "\n":
            line += 1
        top = stack[-1][0] if stack else "container"
        if top != "container":
            if c == "{":
                stack.append(["block", None, line])
            elif c == "}":
                kind, name, first = stack.pop()
                if kind == "function":
                    functions.append(Function(name, first, line))
                    head, head_line = [], None
                elif kind == "initializer":
                    head.append("{}")
            continue
        # Container scope: read declarations.
        if c == "(":
            parens += 1
        elif c == ")":
            parens = max(0, parens - 1)
        if c == "{" and parens == 0:
            text_head = re.sub(r"\s+", " ", "".join(head)).strip()
            kind = _classify(text_head)
            if kind == "function":
                stack.append(["function", _function_name(text_head), head_line or line])
            elif kind == "initializer":
                stack.append(["initializer", None, line])
            elif kind == "container":
                stack.append(["container", None, line])
                head, head_line = [], None
            else:
                stack.append(["block", None, line])
                head, head_line = [], None
            continue
        if c == "}" and parens == 0:
            if stack:
                stack.pop()
            head, head_line = [], None
            continue
        if c == ";" and parens == 0:
            head, head_line = [], None
            continue
        if c == ":" and parens == 0 and re.search(r"\b(public|private|protected)\s*$",
                                                  "".join(head)):
            head, head_line = [], None
            continue
        if not c.isspace() and head_line is None:
            head_line = line
        head.append(c)
    return functions


def check_file(path, text, max_file_lines=MAX_FILE_LINES, max_function_lines=MAX_FUNCTION_LINES):
    """The findings of one source file: its own length, then each function too long."""
    findings = []
    lines = count_lines(text)
    if lines > max_file_lines:
        findings.append(Finding(path, 1, None, lines, max_file_lines))
    for f in find_functions(text):
        if f.length > max_function_lines:
            findings.append(Finding(path, f.first_line, f.name, f.length, max_function_lines))
    findings.sort(key=lambda f: f.line)
    return findings
