"""End to end: recording reconciles and replaying them (issue 27), against the embedded API
server (record_e2e_test, the operator file's spec.record) and real Kubernetes 1.20
(record_kube_e2e_test, `ctrlhost run --record`). The chaos plugin serves 100 Chaos objects, half
of them with a `port` in their data, each reconciled ten times: at least 1,000 recorded
reconciles. `ctrlhost replay` of the recording against the same release finds no difference;
against a release that writes another port it finds exactly the keys with a port, and shows the
port; after --update that release replays clean. A recording cut mid-record, of a newer format
or of another controller is refused naming the file and the offset."""

import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from ctrlhost_sdk import _recording
from e2e.apiserver import apiserver_fixture
from e2e.host import host_fixture
from tools.internal import bazel_unittest

OBJECTS = 100
TOUCHES = 9  # + the creation: 10 reconciles per object

OPERATOR = """\
apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata:
  name: chaos
spec:
  plugins:
    - name: chaos
      exec:
        command: {chaos}
        env:
          CHAOS_DIR: {dir}
  controllers:
    - name: chaos
      maxConcurrentReconciles: 4
"""

# spec.record with the writer at normal priority; `--record` (the Kubernetes variant) keeps the
# default, idle CPU: between them both settings and both ways in are checked.
RECORD = """\
  record:
    dir: {dir}
    maxBytes: 67108864
    cpu: normal
"""


def varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def header(fields):
    """A RecordingHeader's bytes from (field number, wire bytes) pairs of length-delimited or
    varint fields, enough to write the files a reader must refuse."""
    out = bytearray()
    for number, value in fields:
        if isinstance(value, int):
            out += varint(number << 3) + varint(value)
        else:
            out += varint(number << 3 | 2) + varint(len(value)) + value
    return bytes(out)


class RecordTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="record-", dir=os.environ.get("TEST_TMPDIR"))
        cls.chaos = host_fixture.runfile("e2e/host/chaos/chaos")
        operator = OPERATOR.format(chaos=cls.chaos, dir=cls.dir)
        # Not under the plugin's CHAOS_DIR: --record's directory is hidden from plugins
        # (Landlock), which makes the directories above it unwritable for them.
        cls.recordings = tempfile.mkdtemp(prefix="recordings-",
                                          dir=os.environ.get("TEST_TMPDIR"))
        if host_fixture.real_kube():
            cls.host = host_fixture.start_host(operator, extra_args=["--record", cls.recordings])
        else:
            cls.host = host_fixture.start_host(operator + RECORD.format(dir=cls.recordings))
        cls.host.kubectl("apply", "-f", host_fixture.runfile("e2e/host/chaos/crd.yaml"),
                         check=True)
        cls.names = ["rec-%03d" % i for i in range(OBJECTS)]
        items = []
        for i, name in enumerate(cls.names):
            data = {"port": "80"} if i % 2 == 0 else {"k": name}
            items.append({"apiVersion": "e2e.ctrlhost.dev/v1", "kind": "Chaos",
                          "metadata": {"name": name, "namespace": "default"},
                          "spec": {"mode": "ok", "data": data}})
        cls.host.kubectl("apply", "-f", "-", check=True, input_text=json.dumps(
            {"apiVersion": "v1", "kind": "List", "items": items}))
        cls.host.wait_for(lambda: cls.idle() and all(
            cls.host.get("/api/v1/namespaces/default/configmaps/%s" % n) for n in cls.names),
            "every ConfigMap")
        for touch in range(TOUCHES):
            cls.host.kubectl("annotate", "chaos", "--all", "-n", "default", "--overwrite",
                             "e2e.ctrlhost.dev/touch=%d" % touch, check=True)
        cls.host.wait_for(lambda: cls.recorded() >= OBJECTS * (TOUCHES + 1) and cls.idle(),
                          "%d recorded reconciles" % (OBJECTS * (TOUCHES + 1)))
        # Settled: what the recorder took is on disk when its count stops moving.
        cls.host.wait_for(lambda: cls.idle() and cls.recorded() == cls.recorded(), "settled")
        cls.total = cls.recorded()

    @classmethod
    def tearDownClass(cls):
        code = cls.host.stop()
        assert code == 0, "ctrlhost exited %s\n%s" % (code, cls.host.log()[-4000:])

    @classmethod
    def dump(cls):
        status, text = cls.host.endpoint("/debug/dump")
        assert status == 200, text
        return text

    @classmethod
    def recorded(cls):
        match = re.search(r"\n\s+recorded: (\d+)", cls.dump())
        return int(match.group(1)) if match else 0

    @classmethod
    def idle(cls):
        # Every queue of the host is the chaos controller's (none yet: not idle).
        return (cls.host.metric("ctrlhost_plugin_in_flight", plugin="chaos") == 0 and
                cls.host.metric("workqueue_depth", default=1) == 0)

    def replay(self, *args, recording=None, env=()):
        command = [apiserver_fixture.binary_path(), "replay",
                   "--recording", recording or self.recordings, "--command", self.chaos,
                   "--env", "CHAOS_DIR=" + tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))]
        for pair in env:
            command += ["--env", pair]
        return subprocess.run(command + list(args), capture_output=True, text=True, timeout=600)

    def copy_recording(self):
        copy = tempfile.mkdtemp(prefix="copy-", dir=os.environ.get("TEST_TMPDIR"))
        shutil.rmtree(copy)
        shutil.copytree(os.path.join(self.recordings, "chaos"), copy)
        return copy

    def test_1_the_recording_shows_in_the_dump_and_replays_clean_against_the_same_release(self):
        dump = self.dump()
        print(dump[dump.find("recording:"):][:1200])  # docs/recording.md shows it
        self.assertIn("recording:", dump)
        self.assertIn(os.path.join(self.recordings, "chaos"), dump)
        self.assertRegex(dump, r"\n\s+dropped: 0\n")
        # The same figures for Prometheus.
        written = self.host.metric("ctrlhost_recording_records_total", operator="chaos",
                                   plugin="chaos", controller="chaos", result="written")
        self.assertGreaterEqual(written, OBJECTS * (TOUCHES + 1))
        self.assertEqual(self.host.metric("ctrlhost_recording_records_total", controller="chaos",
                                          result="dropped"), 0)
        self.assertGreater(self.host.metric("ctrlhost_recording_bytes_total",
                                            controller="chaos"), 0)
        result = self.replay("--max-differences", "5")
        print(result.stdout[-2000:])
        self.assertEqual(result.returncode, 0, result.stdout[-4000:] + result.stderr)
        match = re.search(r"replayed (\d+) calls of controller chaos \(operator chaos, plugin "
                          r"chaos\) from \d+ files?: (\d+) same, 0 different, 0 failed",
                          result.stdout)
        self.assertIsNotNone(match, result.stdout)
        self.assertGreaterEqual(int(match.group(1)), OBJECTS * (TOUCHES + 1))
        self.assertEqual(match.group(1), match.group(2))

    def test_1_the_writer_runs_on_the_cpu_it_was_given(self):
        # The host's threads under SCHED_IDLE (/proc/PID/task/TID/stat field 41 is 5): the
        # recording's writer alone with --record's default, none with spec.record's cpu: normal.
        idle = 0
        task_dir = "/proc/%d/task" % self.host.process.pid
        for tid in os.listdir(task_dir):
            try:
                with open(os.path.join(task_dir, tid, "stat")) as f:
                    stat = f.read()
            except OSError:
                continue  # the thread ended meanwhile
            idle += int(stat[stat.rindex(")") + 2:].split()[38]) == 5
        self.assertEqual(idle, 1 if host_fixture.real_kube() else 0)

    def test_1_the_sdks_reader_parses_what_the_host_wrote(self):
        # The host writes a record's fields in its own order (the call first, serialized before
        # the dispatch) and packs the capabilities by hand: another protobuf implementation must
        # read every record as the host meant it.
        records = []
        for path in _recording.find_recording(self.recordings, "chaos"):
            recording = _recording.read_recording(path)
            self.assertEqual(recording.header.controller.name, "chaos")
            records += [record for _, record, _ in recording.records]
        self.assertGreaterEqual(len(records), OBJECTS * (TOUCHES + 1))
        self.assertEqual([r.sequence for r in records], list(range(1, len(records) + 1)))
        for r in records:
            self.assertEqual((r.call.controller, r.call.namespace), ("chaos", "default"), r)
            self.assertTrue(r.call.name and r.call.uid and r.call.object, r)
            self.assertEqual(json.loads(r.call.object)["metadata"]["name"], r.call.name)
            self.assertTrue(r.HasField("response") or r.HasField("failure"), r)
            self.assertTrue(r.HasField("time") and r.HasField("took"), r)
            self.assertTrue(r.capabilities, r)
            self.assertNotEqual(r.action.result, 0, r)

    def test_2_a_release_that_writes_another_port_differs_on_exactly_those_keys(self):
        changed = ("CHAOS_CHANGE_DATA_KEY=port", "CHAOS_CHANGE_DATA_VALUE=8080")
        recording = self.copy_recording()
        result = self.replay("--max-differences", "1000000", recording=recording, env=changed)
        self.assertEqual(result.returncode, 1, result.stdout[-4000:] + result.stderr)
        lines = result.stdout.splitlines()
        print("\n".join(lines[:4] + lines[-1:]))  # what a user sees (docs/recording.md shows it)
        keys = set(re.findall(r"^different: \S+ offset \d+ \(record \d+\) default/(rec-\d+): "
                              r"applies$", result.stdout, re.M))
        self.assertEqual(keys, {n for i, n in enumerate(self.names) if i % 2 == 0})
        self.assertIn('/data/port","value":"8080"', result.stdout)
        self.assertNotIn("failed:", result.stdout)

        updated = self.replay("--update", recording=recording, env=changed)
        self.assertEqual(updated.returncode, 0, updated.stdout[-4000:] + updated.stderr)
        self.assertIn("updated: the new answers are the recorded ones now", updated.stdout)
        again = self.replay(recording=recording, env=changed)
        self.assertEqual(again.returncode, 0, again.stdout[-4000:] + again.stderr)
        self.assertIn(" 0 different, 0 failed", again.stdout)
        # ... and the release that is recorded no longer matches it.
        self.assertEqual(self.replay(recording=recording).returncode, 1)

    def test_3_bad_recordings_are_refused_naming_the_file_and_offset(self):
        recording = self.copy_recording()
        files = sorted(os.listdir(recording))
        last = os.path.join(recording, files[-1])
        size = os.path.getsize(last)
        with open(last, "r+b") as f:
            f.truncate(size - 7)
        cut = self.replay(recording=recording)
        self.assertEqual(cut.returncode, 1, cut.stdout[-2000:])
        self.assertRegex(cut.stderr, re.escape(last) + r": record at offset \d+ is cut short "
                         r"\(\d+ of \d+ bytes\): the recording was interrupted")
        tolerated = self.replay("--ignore-cut-tail", recording=recording)
        self.assertEqual(tolerated.returncode, 0, tolerated.stdout[-2000:] + tolerated.stderr)
        self.assertIn("ignored: --ignore-cut-tail", tolerated.stdout)

        newer = os.path.join(recording, "99999998.ctrlrec")
        body = header([(1, 2), (4, header([(1, b"chaos")]))])
        with open(newer, "wb") as f:
            f.write(b"CTRLREC\n" + varint(len(body)) + body)
        result = self.replay(recording=recording)
        self.assertEqual(result.returncode, 1)
        self.assertIn(newer + ": recording format 2 is newer than this reader (it reads "
                      "format 1)", result.stderr)
        os.remove(newer)

        other = os.path.join(recording, "99999999.ctrlrec")
        body = header([(1, 1), (4, header([(1, b"other")]))])
        with open(other, "wb") as f:
            f.write(b"CTRLREC\n" + varint(len(body)) + body)
        result = self.replay(recording=recording)
        self.assertEqual(result.returncode, 1)
        self.assertIn(other + ": holds controller other, not chaos", result.stderr)
        os.remove(other)

        with open(other, "wb") as f:
            f.write(b"apiVersion: v1\n")
        result = self.replay(recording=recording)
        self.assertIn(other + ": not a ctrlhost recording (no CTRLREC magic at offset 0)",
                      result.stderr)

        result = self.replay("--controller", "nosuch")
        self.assertEqual(result.returncode, 1)
        self.assertIn(": holds no recording of controller nosuch (found: chaos)", result.stderr)
        result = self.replay(recording=os.path.join(self.dir, "nowhere"))
        self.assertEqual(result.returncode, 1)
        self.assertIn("no such directory", result.stderr)
        usage = subprocess.run([apiserver_fixture.binary_path(), "replay", "--recording",
                                self.recordings], capture_output=True, text=True, timeout=60)
        self.assertEqual(usage.returncode, 2, usage.stderr)
        self.assertIn("--command", usage.stderr)

    def test_4_a_live_edit_of_spec_record_moves_the_recording(self):
        """A spec.record added or changed in the operator file applies live (the controllers
        restart) and wins over --record; the former recorder's file is closed complete."""
        moved = tempfile.mkdtemp(prefix="moved-", dir=os.environ.get("TEST_TMPDIR"))
        with open(os.path.join(self.host.data_dir, "operator.yaml"), "w") as f:
            f.write(OPERATOR.format(chaos=self.chaos, dir=self.dir) + RECORD.format(dir=moved))
        self.host.wait_for(lambda: os.path.join(moved, "chaos") in self.dump(),
                           "the recording in the new directory")
        self.host.kubectl("annotate", "chaos", self.names[0], "-n", "default", "--overwrite",
                          "e2e.ctrlhost.dev/touch=moved", check=True)
        self.host.wait_for(lambda: self.recorded() >= 1 and self.idle(), "a record in it")
        result = self.replay(recording=os.path.join(moved, "chaos"))
        self.assertEqual(result.returncode, 0, result.stdout[-2000:] + result.stderr)
        # The old directory's files end with a whole record: it replays without --ignore-cut-tail.
        old = self.replay(recording=self.copy_recording())
        self.assertEqual(old.returncode, 0, old.stdout[-2000:] + old.stderr)


if __name__ == "__main__":
    bazel_unittest.main()
