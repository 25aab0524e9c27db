"""Counts test results for tools/test.

Modes (each prints "passed failed skipped" for one stage, its failures to stderr, and exits 1
when the stage failed):
  --bazel-log LOG --testlogs DIR --exit-code RC --label L   reads `bazel test --keep_going
      --test_summary=short` output, each target's test.xml (one count per <testcase>) and Bazel's
      exit status. A non-zero exit the target lines do not explain (exit 1 with no target that
      FAILED TO BUILD, exit 3 with no failing target, any other code), a package that did not
      load or a target that did not analyze (their tests never ran, and no target line says so)
      and a run with no test target each count one failure.
  --tap LOG --exit-code RC --label L         the same for `node --test` output (TAP or spec
      reporter summary lines); no summary, or one that counts no test, is a failure.
  --go-test LOG --exit-code RC --label L     the same for `go vet` + `go test -v` output: one count
      per top-level test and example (subtests are part of their test); no test is a failure.
  --fuzz LOG --exit-code RC --label L        the same for tools/fuzz output: one test per
      target ("fuzz T: ok, ..." passed, "fuzz T: FAILED ..." failed).
  --total FILE...                            one stage per NAME.counts file, in the order given:
      prints a table (stage, seconds from NAME.seconds, passed, failed, skipped) and then
      "N passed, N failed, N skipped"; a missing or unreadable counts file is a failure of its
      stage; exits 1 when anything failed.
"""

import argparse
import os
import re
import sys
import xml.etree.ElementTree as ET

TARGET_LINE = re.compile(
    r"^(//\S+)\s+(?:\(cached\)\s+)?(PASSED|FAILED TO BUILD|FAILED|TIMEOUT|FLAKY|NO STATUS|"
    r"SKIPPED|INCOMPLETE|REMOTE FAILURE)\b")
# Results that say the target did not build (what Bazel's exit code 1 is about).
NOT_BUILT = ("FAILED TO BUILD", "NO STATUS")
# Results of a target that built and did not pass (what exit code 3 is about).
TEST_FAILED = ("FAILED", "TIMEOUT", "INCOMPLETE", "REMOTE FAILURE", "NO STATUS")
# Under --keep_going a package that does not load or a target that does not analyze is left
# out of the run: no target line names it, only these messages do.
PACKAGE_NOT_LOADED = re.compile(
    r"^ERROR: (?:package contains errors: (\S+)|error loading package '([^']*)')")
TARGET_NOT_ANALYZED = re.compile(r"^WARNING: errors encountered while analyzing target '([^']+)'")
BAZEL_EXIT = {
    0: "success",
    1: "the build failed",
    2: "command line or environment problem",
    3: "the build succeeded but some tests failed",
    4: "the build succeeded but no test target was found",
    8: "interrupted",
    36: "local environment problem",
    37: "Bazel crashed",
}


def xml_counts(path):
    """(passed, failed, skipped) from a JUnit XML file, or None if unusable."""
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError):
        return None
    cases = root.iter("testcase")
    passed = failed = skipped = 0
    seen = False
    for case in cases:
        seen = True
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.find("skipped") is not None or case.get("result") == "suppressed" or \
                case.get("status") == "notrun":
            skipped += 1
        else:
            passed += 1
    if not seen:
        return None
    return passed, failed, skipped


def bazel_counts(log, testlogs, exit_code, label):
    passed = failed = skipped = 0
    results = []
    failures = []
    not_loaded = []
    not_analyzed = []
    with open(log, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = PACKAGE_NOT_LOADED.match(line)
            if m:
                package = "//" + (m.group(1) or m.group(2))
                if package not in not_loaded:
                    not_loaded.append(package)
                continue
            m = TARGET_NOT_ANALYZED.match(line)
            if m:
                if m.group(1) not in not_analyzed:
                    not_analyzed.append(m.group(1))
                continue
            m = TARGET_LINE.match(line.strip())
            if not m:
                continue
            target, result = m.group(1), m.group(2)
            results.append(result)
            if result in NOT_BUILT:
                # Whatever test.xml is there is from an earlier run.
                failed += 1
                failures.append(f"{target} {result}")
                continue
            rel = target[2:].replace(":", "/")
            counts = xml_counts(os.path.join(testlogs, rel, "test.xml"))
            if result in ("PASSED", "FLAKY"):
                if counts and counts[1] == 0:
                    passed += counts[0]
                    skipped += counts[2]
                elif counts:
                    failed += counts[1]
                    failures.append(f"{target} {result}, but its test.xml reports "
                                    f"{counts[1]} failed test(s)")
                else:
                    passed += 1
            elif result == "SKIPPED":
                skipped += 1
            else:
                if counts and counts[1] > 0:
                    passed += counts[0]
                    failed += counts[1]
                    skipped += counts[2]
                else:
                    failed += 1
                failures.append(f"{target} {result}")
    if not_loaded or not_analyzed:
        # One failure for all of them: how many tests they hold is unknown.
        failed += 1
        failures.append("did not load or build, so their tests did not run and are not counted: "
                        + ", ".join([f"{p} (package)" for p in not_loaded] + not_analyzed))
    meaning = BAZEL_EXIT.get(exit_code, "unknown exit code")
    if exit_code == 0:
        pass
    elif exit_code == 1:
        if not (not_loaded or not_analyzed or any(r in NOT_BUILT for r in results)):
            failed += 1
            failures.append(f"bazel test exited 1 ({meaning}) but no test target is reported as "
                            "not built: tests may be missing from these counts (see the ERROR "
                            "lines above)")
    elif exit_code == 3:
        if not any(r in TEST_FAILED for r in results):
            failed += 1
            failures.append(f"bazel test exited 3 ({meaning}) but no failing test target was "
                            "found in its output")
    elif exit_code != 4 or results:  # 4 with no target line is reported below
        failed += 1
        failures.append(f"bazel test exited {exit_code} ({meaning})")
    if not results:
        failed += 1
        failures.append(f"no test target ran (bazel test exited {exit_code}: {meaning})")
    for f in failures:
        print(f"[{label}] {f}", file=sys.stderr)
    return passed, failed, skipped


def tap_counts(log, exit_code, label):
    counts = {"pass": 0, "fail": 0, "cancelled": 0, "skipped": 0, "todo": 0}
    with open(log, encoding="utf-8", errors="replace") as f:
        text = f.read()
    for key in counts:
        m = re.findall(rf"^(?:#|\u2139) {key} (\d+)$", text, re.M)
        if m:
            counts[key] = int(m[-1])
    passed = counts["pass"]
    failed = counts["fail"] + counts["cancelled"]
    skipped = counts["skipped"] + counts["todo"]
    if exit_code != 0 and failed == 0:
        failed = 1
        print(f"[{label}] exited {exit_code}:\n{text[-3000:]}", file=sys.stderr)
    elif failed:
        print(f"[{label}] failures:\n{text[-6000:]}", file=sys.stderr)
    elif passed + skipped == 0:
        # node --test exits 0 when it finds no test file at all ("# tests 0").
        failed = 1
        print(f"[{label}] no test ran (no \"# pass N\" or \"# skipped N\" with N > 0):\n"
              f"{text[-3000:]}", file=sys.stderr)
    return passed, failed, skipped


GO_RESULT = re.compile(r"^--- (PASS|FAIL|SKIP): (\S+)")
GO_PACKAGE_FAILED = re.compile(r"^FAIL\s+\S+\s+\[(build failed|setup failed)\]")


def go_counts(log, exit_code, label):
    passed = failed = skipped = 0
    failures = []
    with open(log, encoding="utf-8", errors="replace") as f:
        text = f.read()
    for line in text.splitlines():
        m = GO_RESULT.match(line)  # unindented: top-level tests and examples only
        if m:
            if m.group(1) == "PASS":
                passed += 1
            elif m.group(1) == "SKIP":
                skipped += 1
            else:
                failed += 1
                failures.append(m.group(2))
        elif GO_PACKAGE_FAILED.match(line):
            failed += 1
            failures.append(line.strip())
    if exit_code != 0 and failed == 0:
        failed = 1
        print(f"[{label}] exited {exit_code}:\n{text[-3000:]}", file=sys.stderr)
    elif failed:
        print(f"[{label}] failures: {', '.join(failures)}\n{text[-6000:]}", file=sys.stderr)
    elif passed + skipped == 0:
        # go test exits 0 when no package has a test ("[no test files]") or -run matches none.
        failed = 1
        print(f"[{label}] no test ran (no \"--- PASS\" or \"--- SKIP\" line):\n{text[-3000:]}",
              file=sys.stderr)
    return passed, failed, skipped


FUZZ_LINE = re.compile(r"^fuzz (\S+): (ok|FAILED)\b")


def fuzz_counts(log, exit_code, label):
    passed = failed = 0
    failures = []
    with open(log, encoding="utf-8", errors="replace") as f:
        text = f.read()
    for line in text.splitlines():
        m = FUZZ_LINE.match(line)
        if not m:
            continue
        if m.group(2) == "ok":
            passed += 1
        else:
            failed += 1
            failures.append(line)
    if exit_code != 0 and failed == 0:
        failed = 1
        failures.append("tools/fuzz exited %d:\n%s" % (exit_code, text[-3000:]))
    elif exit_code == 0 and passed == 0:
        failed = 1
        failures.append("no fuzz target ran")
    for f in failures:
        print(f"[{label}] {f}", file=sys.stderr)
    return passed, failed, 0


def read_stage(counts_path):
    """(name, seconds or None, (passed, failed, skipped) or None) of one NAME.counts file."""
    name = os.path.basename(counts_path)
    if name.endswith(".counts"):
        name = name[:-len(".counts")]
    seconds = None
    try:
        with open(os.path.splitext(counts_path)[0] + ".seconds") as f:
            seconds = float(f.read())
    except (OSError, ValueError):
        pass
    try:
        with open(counts_path) as f:
            values = [int(v) for v in f.read().split()]
    except (OSError, ValueError):
        values = []
    if len(values) != 3 or min(values) < 0:
        return name, seconds, None
    return name, seconds, tuple(values)


def total(paths):
    """The summary table and closing line for the given stages; (text, failed anything)."""
    lines = [f"{'stage':<14}{'seconds':>9}{'passed':>9}{'failed':>9}{'skipped':>9}"]
    passed = failed = skipped = 0
    for path in paths:
        name, seconds, counts = read_stage(path)
        if counts is None:
            print(f"[{name}] no counts in {path}: the stage did not finish counting; "
                  "counted as 1 failure", file=sys.stderr)
            counts = (0, 1, 0)
        x, y, z = counts
        passed, failed, skipped = passed + x, failed + y, skipped + z
        shown = "-" if seconds is None else f"{seconds:.1f}"
        lines.append(f"{name:<14}{shown:>9}{x:>9}{y:>9}{z:>9}")
    lines.append(f"{passed} passed, {failed} failed, {skipped} skipped")
    return "\n".join(lines), failed > 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bazel-log")
    p.add_argument("--testlogs")
    p.add_argument("--tap")
    p.add_argument("--go-test")
    p.add_argument("--fuzz")
    p.add_argument("--exit-code", type=int,
                   help="the exit status of the command that wrote the log (required)")
    p.add_argument("--label", default="")
    p.add_argument("--total", nargs="+")
    a = p.parse_args()
    if a.total:
        text, failed = total(a.total)
        print(text)
        return 1 if failed else 0
    if a.exit_code is None:
        p.error("--exit-code is required: a log alone cannot tell a run that stopped early")
    if a.tap:
        c = tap_counts(a.tap, a.exit_code, a.label)
    elif a.go_test:
        c = go_counts(a.go_test, a.exit_code, a.label)
    elif a.fuzz:
        c = fuzz_counts(a.fuzz, a.exit_code, a.label)
    elif a.bazel_log and a.testlogs:
        c = bazel_counts(a.bazel_log, a.testlogs, a.exit_code, a.label)
    else:
        p.error("one of --bazel-log (with --testlogs), --tap, --go-test, --fuzz, --total")
    print(*c)
    return 1 if c[1] else 0


if __name__ == "__main__":
    sys.exit(main())
