"""Counts test results for tools/test.

Modes:
  --bazel-log LOG --testlogs DIR --label L   reads `bazel test` output and each target's
      test.xml; prints "passed failed skipped" counts and the failing tests to stderr.
  --tap LOG --exit-code RC --label L         the same for `node --test` output (TAP or spec
      reporter summary lines).
  --go-test LOG --exit-code RC --label L     the same for `go vet` + `go test -v` output: one count
      per top-level test and example (subtests are part of their test).
  --fuzz LOG --exit-code RC --label L        the same for tools/fuzz output: one test per
      target ("fuzz T: ok, ..." passed, "fuzz T: FAILED ..." failed).
  --total FILE...                            sums count files; prints "N passed, N failed,
      N skipped"; exits 1 when anything failed.
"""

import argparse
import os
import re
import sys
import xml.etree.ElementTree as ET

TARGET_LINE = re.compile(
    r"^(//\S+)\s+(?:\(cached\)\s+)?(PASSED|FAILED|TIMEOUT|FLAKY|NO STATUS|FAILED TO BUILD|"
    r"SKIPPED|INCOMPLETE|REMOTE FAILURE|FAILED TO BUILD)\b")


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


def bazel_counts(log, testlogs, label):
    passed = failed = skipped = 0
    targets = 0
    failures = []
    build_failed = False
    with open(log, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("FAILED: Build did NOT complete") or \
                    line.startswith("ERROR: Build did NOT complete"):
                build_failed = True
            m = TARGET_LINE.match(line.strip())
            if not m:
                continue
            target, result = m.group(1), m.group(2)
            targets += 1
            rel = target[2:].replace(":", "/")
            counts = xml_counts(os.path.join(testlogs, rel, "test.xml"))
            if result in ("PASSED", "FLAKY"):
                if counts and counts[1] == 0:
                    passed += counts[0]
                    skipped += counts[2]
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
    if build_failed and not failures:
        failures.append("the build failed (see above)")
        failed += 1
    if targets == 0 and not build_failed:
        failures.append("no test targets ran")
        failed += 1
    for f in failures:
        print(f"[{label}] {f}", file=sys.stderr)
    return passed, failed, skipped


def tap_counts(log, exit_code, label):
    counts = {"pass": 0, "fail": 0, "skipped": 0, "todo": 0}
    with open(log, encoding="utf-8", errors="replace") as f:
        text = f.read()
    for key in counts:
        m = re.findall(rf"^(?:#|\u2139) {key} (\d+)$", text, re.M)
        if m:
            counts[key] = int(m[-1])
    passed, failed = counts["pass"], counts["fail"]
    skipped = counts["skipped"] + counts["todo"]
    if exit_code != 0 and failed == 0:
        failed = 1
        print(f"[{label}] exited {exit_code}:\n{text[-3000:]}", file=sys.stderr)
    elif failed:
        print(f"[{label}] failures:\n{text[-6000:]}", file=sys.stderr)
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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bazel-log")
    p.add_argument("--testlogs")
    p.add_argument("--tap")
    p.add_argument("--go-test")
    p.add_argument("--fuzz")
    p.add_argument("--exit-code", type=int, default=0)
    p.add_argument("--label", default="")
    p.add_argument("--total", nargs="+")
    a = p.parse_args()
    if a.total:
        passed = failed = skipped = 0
        for path in a.total:
            with open(path) as f:
                x, y, z = (int(v) for v in f.read().split())
            passed, failed, skipped = passed + x, failed + y, skipped + z
        print(f"{passed} passed, {failed} failed, {skipped} skipped")
        return 1 if failed else 0
    if a.tap:
        c = tap_counts(a.tap, a.exit_code, a.label)
    elif a.go_test:
        c = go_counts(a.go_test, a.exit_code, a.label)
    elif a.fuzz:
        c = fuzz_counts(a.fuzz, a.exit_code, a.label)
    else:
        c = bazel_counts(a.bazel_log, a.testlogs, a.label)
    print(*c)
    return 1 if c[1] else 0


if __name__ == "__main__":
    sys.exit(main())
