#!/usr/bin/env python3
"""Checks a WebApp plugin (and optionally a scenario plugin) written in any language against the
golden answers of the C++ reference, through `ctrlhost test`: no Bazel, no API server.

    e2e/conformance/check_plugin.py --ctrlhost bazel-bin/runtime/exe/ctrlhost \
        --webapp ./my-webapp-plugin [--scenario ./my-scenario-plugin]
    e2e/conformance/check_plugin.py --ctrlhost ... --webapp ... --write-golden   (maintainers:
        regenerate testdata/golden/ from the C++ reference after a deliberate change)

The plugin is any executable that serves $CTRLHOST_PLUGIN_ADDRESS (docs/protocol.md §2 and the
checklist in §12). Each case runs `ctrlhost test --plugin PLUGIN -o json --check` on an input of
testdata/ and compares the whole JSON answer (keys sorted, request_id dropped) with
testdata/golden/<case>.json; the WebApp's external record file is compared byte for byte with
testdata/golden/fresh.record.json. Exit status 0 when every case matches, 1 otherwise, with a
diff of each mismatch. Uses only the Python standard library (python3 >= 3.7).
"""

import argparse
import difflib
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TESTDATA = os.path.join(HERE, "testdata")
GOLDEN = os.path.join(TESTDATA, "golden")
SAMPLE = os.path.join(HERE, "..", "..", "plugins", "webapp", "testdata", "webapp.yaml")

# (case, plugin kind, args, expected exit code of `ctrlhost test`)
CASES = [
    ("fresh", "webapp", ["--object", SAMPLE], 0),
    ("ready", "webapp", ["--object", SAMPLE, "--children", os.path.join(TESTDATA, "children")], 0),
    ("invalid", "webapp", ["--object", os.path.join(TESTDATA, "invalid.yaml")], 0),
    ("malformed", "webapp", ["--object", os.path.join(TESTDATA, "malformed.yaml")], 0),
    ("finalizing", "webapp", ["--object", SAMPLE, "--finalizing"], 0),
] + [
    ("scenario-" + outcome, "scenario",
     ["--object", os.path.join(TESTDATA, "scenarios", outcome + ".yaml")],
     3 if outcome == "forbidden" else 0)
    for outcome in ("ok", "requeue", "retryable", "terminal", "forbidden")
]


def run_case(ctrlhost, plugin, args, record_dir):
    env = dict(os.environ, WEBAPP_RECORD_DIR=record_dir)
    result = subprocess.run(
        [ctrlhost, "test", "--log-level=warning", "--plugin", plugin, "-o", "json", "--check"]
        + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
        timeout=120, env=env)
    answer = None
    if result.stdout.strip():
        try:
            answer = json.loads(result.stdout)
            answer.pop("request_id", None)
        except ValueError:
            pass
    return result.returncode, answer, result.stderr


def canonical(value):
    return json.dumps(value, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ctrlhost", required=True, help="the ctrlhost binary")
    p.add_argument("--webapp", required=True, help="the WebApp plugin executable")
    p.add_argument("--scenario", help="the scenario plugin executable (optional)")
    p.add_argument("--write-golden", action="store_true",
                   help="write the answers as the new golden files (the C++ reference only)")
    a = p.parse_args()
    plugins = {"webapp": a.webapp, "scenario": a.scenario}
    failures = 0
    checked = 0
    for name, kind, args, want_exit in CASES:
        plugin = plugins[kind]
        if plugin is None:
            print("SKIP %s (no --%s plugin)" % (name, kind))
            continue
        checked += 1
        with tempfile.TemporaryDirectory(prefix="conformance-") as tmp:
            records = os.path.join(tmp, "records")
            code, answer, stderr = run_case(a.ctrlhost, plugin, args, records)
            record_path = os.path.join(records, "default_shop.json")
            record = None
            if name == "fresh" and os.path.exists(record_path):
                with open(record_path, "rb") as f:
                    record = f.read()
        golden_path = os.path.join(GOLDEN, name + ".json")
        if a.write_golden:
            if code != want_exit or answer is None:
                print("FAIL %s: ctrlhost test exited %d\n%s" % (name, code, stderr))
                failures += 1
                continue
            os.makedirs(GOLDEN, exist_ok=True)
            with open(golden_path, "w", encoding="utf-8") as f:
                f.write(canonical(answer))
            if record is not None:
                with open(os.path.join(GOLDEN, "fresh.record.json"), "wb") as f:
                    f.write(record)
            print("WROTE %s" % golden_path)
            continue
        problems = []
        if code != want_exit:
            problems.append("ctrlhost test exited %d, want %d\n%s" % (code, want_exit, stderr))
        with open(golden_path, encoding="utf-8") as f:
            want = f.read()
        got = canonical(answer) if answer is not None else "(no JSON answer)\n"
        if got != want:
            problems.append("".join(difflib.unified_diff(
                want.splitlines(True), got.splitlines(True), "golden/" + name + ".json",
                "answer")))
        if name == "fresh":
            with open(os.path.join(GOLDEN, "fresh.record.json"), "rb") as f:
                want_record = f.read()
            if record != want_record:
                problems.append("the record file differs from golden/fresh.record.json:\n%r\n%r"
                                % (want_record, record))
        if problems:
            failures += 1
            print("FAIL %s\n%s" % (name, "\n".join(problems)))
        else:
            print("PASS %s" % name)
    print("%d checked, %d failed" % (checked, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
