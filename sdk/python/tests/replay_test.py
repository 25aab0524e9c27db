"""testing.replay / testing.assert_replay: a recording written here with the generated protobuf
types (the file format of plugin.proto, framed by this test's own varint writer) replayed
against the controller that answered it (no difference), against changed controllers (exactly
the changed keys), with `update` (then clean), and every reader error with the host's text."""

import base64
import hashlib
import json
import os
import shutil
import tempfile
import unittest

from ctrlhost_sdk import Controller, Plugin, Request, Result, new_object, pb, testing
from ctrlhost_sdk._replay import json_diff, normalize, redact_response
from ctrlhost_sdk.result import ALL_CAPABILITIES
from tools.internal import bazel_unittest

MAGIC = b"CTRLREC\n"
PASSWORD = "hunter2"


def varint(n):
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def framed(message):
    data = message.SerializeToString()
    return varint(len(data)) + data


def header(controller="greeter", fmt=1, secret_data=False):
    kind = pb.RecordedKind
    return pb.RecordingHeader(
        format=fmt, operator="greetings", plugin="greeter-py", host_version="0.9.0",
        secret_data=secret_data,
        controller=pb.RecordedController(
            name=controller, field_manager="ctrlhost-" + controller,
            primary=kind(group="example.com", version="v1", resource="greetings",
                         kind="Greeting", namespaced=True, has_status=True),
            owns=[kind(version="v1", resource="configmaps", kind="ConfigMap", namespaced=True),
                  kind(version="v1", resource="secrets", kind="Secret", namespaced=True)]))


def greeter(greeting="Hello", password=PASSWORD, fail_on=None, requeue=True):
    """The controller under test; the arguments change its answers."""
    c = (Controller("greeter").for_("example.com", "v1", "Greeting")
         .owns("", "v1", "ConfigMap").owns("", "v1", "Secret"))

    @c.reconcile
    def reconcile(req: Request) -> Result:
        result = Result()
        if not req.exists:
            return result
        if req.name == fail_on:
            raise RuntimeError("no greeting today")
        if req.spec.get("secret"):
            secret = result.desire(new_object("v1", "Secret", req.name + "-creds"))
            secret["stringData"] = {"password": password}
            token = base64.b64encode(password.encode()).decode()
            result.patch_owned("v1", "Secret", req.name + "-creds", {"data": {"token": token}})
        else:
            cm = result.desire(new_object("v1", "ConfigMap", req.name + "-greeting"))
            cm["data"] = {"text": "%s, %s!" % (greeting, req.spec.get("who"))}
        result.status["replicas"] = 1
        result.set_condition("Ready", True, "Greeted", "greeted")
        result.event("Normal", "Greeted", "greeted " + req.name)
        if req.name == "slow" and requeue:
            result.requeue_after = 30
        return result

    return c


def unrelated():
    c = Controller("unrelated").for_("example.com", "v1", "Other")
    c.reconcile(lambda req: None)
    return c


def primary(name, **spec):
    return {"apiVersion": "example.com/v1", "kind": "Greeting",
            "metadata": {"name": name, "namespace": "default", "uid": "uid-" + name},
            "spec": spec}


def digest(value):
    return "sha256:" + hashlib.sha256(value.encode()).hexdigest()


def redacted_as_the_host_does(response):
    """The recorded answer: Secret values digested by this test, the JSON re-serialized with
    other key orders and spacing (neither counts)."""
    for i, raw in enumerate(response.desired_objects):
        obj = json.loads(raw)
        if obj["kind"] == "Secret":
            obj["stringData"] = {k: digest(v) for k, v in obj["stringData"].items()}
        response.desired_objects[i] = json.dumps(obj, sort_keys=True, indent=1).encode()
    for patch in response.patches:
        body = json.loads(patch.patch)
        body["data"] = {k: digest(v) for k, v in body["data"].items()}
        patch.patch = json.dumps(body).encode()
    if response.status:
        response.status = b'{"replicas": 1.0}'
    return response


def record(sequence, call, controller=None):
    """A record of `call` answered by `controller` (None: a failed dispatch)."""
    r = pb.ReconcileRecord(sequence=sequence, call=call,
                           capabilities=sorted(ALL_CAPABILITIES))
    r.time.FromSeconds(1700000000 + sequence)
    r.action.result = pb.HOST_ACTION_RESULT_WRITTEN
    if controller is None:
        r.failure.code = 4
        r.failure.message = "deadline exceeded"
    else:
        answer = controller.invoke(100 + sequence, call, ALL_CAPABILITIES)
        r.response.CopyFrom(redacted_as_the_host_does(answer))
    return r


def calls():
    make = testing.make_call
    return [make("greeter", primary("a", who="Ann")),
            make("greeter", primary("b", secret=True)),
            make("greeter", primary("c", who="Cy")),
            make("greeter", None, reason=pb.REASON_PRIMARY_DELETED),
            make("greeter", primary("bad", who="Bo")),
            make("greeter", primary("slow", who="Sam"))]


def records(controller):
    out = [record(i + 1, call, controller) for i, call in enumerate(calls())]
    out[2] = record(3, calls()[2], None)  # c: the dispatch failed
    # The error's message does not count: it often carries details such as timestamps.
    out[4].response.error.message = "reconcile raised RuntimeError: at 12:00:01"
    return out


def read(path):
    with open(path, "rb") as f:
        return f.read()


def write(path, head, recs, extra=b""):
    with open(path, "wb") as f:
        f.write(MAGIC + framed(head) + b"".join(framed(r) for r in recs) + extra)
    return path


class ReplayTestCase(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.addCleanup(shutil.rmtree, self.dir)
        recorded = greeter(fail_on="bad")
        recs = records(recorded)
        # Two files, read in name order.
        write(os.path.join(self.dir, "00000001.ctrlrec"), header(), recs[:4])
        write(os.path.join(self.dir, "00000002.ctrlrec"), header(), recs[4:])

    def file(self, n):
        return os.path.join(self.dir, "%08d.ctrlrec" % n)


class ReplayTest(ReplayTestCase):
    def test_the_same_controller_answers_the_same(self):
        result = testing.replay(greeter(fail_on="bad"), self.dir)
        self.assertEqual(result.differences, [])
        self.assertEqual((result.compared, result.same, result.different, result.skipped),
                         (5, 5, 0, 1))
        self.assertEqual(result.files, [self.file(1), self.file(2)])
        self.assertEqual(result.updated, [])
        testing.assert_replay(greeter(fail_on="bad"), self.dir)

    def test_a_changed_controller_differs_at_exactly_the_changed_keys(self):
        result = testing.replay(greeter(greeting="Hi", fail_on="bad"), self.dir)
        self.assertEqual([(d.key, d.members) for d in result.differences],
                         [("default/a", ["desired"]), ("default/slow", ["desired"])])
        first = result.differences[0]
        self.assertEqual((first.file, first.offset, first.sequence),
                         (self.file(1), len(MAGIC) + len(framed(header())), 1))
        self.assertEqual(first.patch, [
            {"op": "replace", "path": "/desired/v1 ConfigMap default~1a-greeting/data/text",
             "value": "Hi, Ann!"}])
        self.assertIn('"Hello, Ann!" -> "Hi, Ann!"', str(first))
        self.assertEqual((result.compared, result.same, result.different), (5, 3, 2))

    def test_a_changed_secret_differs_by_its_digest_only(self):
        result = testing.replay(greeter(password="swordfish", fail_on="bad"), self.dir)
        self.assertEqual([(d.key, d.members) for d in result.differences],
                         [("default/b", ["desired", "patches"])])
        text = str(result.differences[0])
        self.assertIn(digest("swordfish"), text)
        self.assertNotIn("swordfish", text.replace(digest("swordfish"), ""))

    def test_a_digest_is_not_digested_again(self):
        # A controller that copies a Secret's value from a replayed call (which carries the
        # digest) answers with the digest: kept, so it matches the recorded answer.
        from ctrlhost_sdk import _replay
        self.assertEqual(_replay.secret_digest(digest("swordfish")), digest("swordfish"))
        self.assertEqual(_replay.secret_digest("sha256:short"), digest("sha256:short"))

    def test_a_failing_run_is_compared_as_its_error_answer(self):
        result = testing.replay(greeter(fail_on="a"), self.dir)
        self.assertEqual([(d.key, d.members) for d in result.differences],
                         [("default/a", ["desired", "status", "conditions", "events", "error"]),
                          ("default/bad", ["desired", "status", "conditions", "events",
                                           "error"])])
        self.assertEqual(result.differences[0].replayed["error"], {"kind": "retryable"})

    def test_requeue_after_counts(self):
        result = testing.replay(greeter(fail_on="bad", requeue=False), self.dir)
        self.assertEqual([(d.key, d.members, d.recorded) for d in result.differences],
                         [("default/slow", ["requeueAfter"], {"requeueAfter": 30.0})])

    def test_assert_replay_lists_the_first_twenty_and_the_totals(self):
        make = testing.make_call
        recs = [record(i + 1, make("greeter", primary("k%02d" % i, who="x")), greeter())
                for i in range(25)]
        one = write(os.path.join(self.dir, "many.ctrlrec"), header(), recs)
        with self.assertRaises(AssertionError) as caught:
            testing.assert_replay(greeter(greeting="Hi"), one)
        message = str(caught.exception)
        self.assertIn("25 of 25 replayed answers differ (0 same, 0 skipped, 1 files)", message)
        self.assertIn("default/k19", message)
        self.assertNotIn("default/k20", message)
        self.assertIn("... and 5 more", message)

    def test_update_rewrites_the_answers_and_keeps_the_rest(self):
        before = [read(self.file(n)) for n in (1, 2)]
        before_bodies = _bodies_of(self.file(1))
        changed = greeter(greeting="Hi", fail_on="bad")
        result = testing.replay(changed, self.dir, update=True)
        self.assertEqual(result.different, 2)
        self.assertEqual(result.updated, [self.file(1), self.file(2)])
        testing.assert_replay(changed, self.dir)
        self.assertEqual(testing.replay(greeter(fail_on="bad"), self.dir).different, 2)
        # The header bytes, the failed dispatch and every other field are as they were.
        after = read(self.file(1))
        start = len(MAGIC) + len(framed(header()))
        self.assertEqual(after[:start], before[0][:start])
        self.assertEqual(os.listdir(self.dir).count("00000001.ctrlrec"), 1)
        self.assertEqual(sorted(os.listdir(self.dir)), ["00000001.ctrlrec", "00000002.ctrlrec"])
        recs = _records_of(self.file(1))
        self.assertEqual([r.sequence for r in recs], [1, 2, 3, 4])
        self.assertEqual(recs[2].WhichOneof("answer"), "failure")
        self.assertEqual(recs[0].response.request_id, 101)
        self.assertEqual(recs[0].time.seconds, 1700000001)
        self.assertEqual(recs[0].action.result, pb.HOST_ACTION_RESULT_WRITTEN)
        self.assertIn(b"Hi, Ann!", recs[0].response.desired_objects[0])
        self.assertNotIn(PASSWORD.encode(), after)  # the new answers are redacted too
        # Records whose answers did not differ keep their bytes.
        self.assertEqual(_bodies_of(self.file(1))[1:], before_bodies[1:])
        # A second update with the same controller changes nothing.
        self.assertEqual(testing.replay(changed, self.dir, update=True).updated, [])

    def test_update_keeps_fields_this_sdk_does_not_know(self):
        data = read(self.file(1))
        start = len(MAGIC) + len(framed(header()))
        first = _records_of(self.file(1))[0].SerializeToString()
        unknown = b"\xf8\x06\x2a"  # field 111, varint 42
        one = os.path.join(self.dir, "unknown.ctrlrec")
        with open(one, "wb") as f:
            f.write(data[:start] + varint(len(first) + 3) + first + unknown)
        result = testing.replay(greeter(greeting="Hi"), one, update=True)
        self.assertEqual(result.updated, [one])
        self.assertIn(unknown, read(one))
        self.assertEqual(_records_of(one)[0].sequence, 1)

    def test_assert_replay_with_update_does_not_fail(self):
        result = testing.assert_replay(greeter(greeting="Hi", fail_on="bad"), self.dir,
                                       update=True)
        self.assertEqual(result.different, 2)
        testing.assert_replay(greeter(greeting="Hi", fail_on="bad"), self.dir)

    def test_secret_data_recordings_compare_the_values(self):
        c = greeter()
        call = testing.make_call("greeter", primary("b", secret=True))
        r = pb.ReconcileRecord(sequence=1, call=call, capabilities=sorted(ALL_CAPABILITIES))
        r.response.CopyFrom(c.invoke(1, call, ALL_CAPABILITIES))
        one = write(os.path.join(self.dir, "secret.ctrlrec"), header(secret_data=True), [r])
        self.assertEqual(testing.replay(c, one).differences, [])
        result = testing.replay(greeter(password="swordfish"), one)
        self.assertIn('"swordfish"', str(result.differences[0]))


def _bodies_of(path):
    """The encoded records of the file at `path` (its header left out)."""
    data = read(path)
    pos, out = len(MAGIC), []
    while pos < len(data):
        size, shift = 0, 0
        while True:
            b = data[pos]
            pos += 1
            size |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        out.append(data[pos:pos + size])
        pos += size
    return out[1:]


def _records_of(path):
    return [pb.ReconcileRecord.FromString(body) for body in _bodies_of(path)]


class LayoutTest(ReplayTestCase):
    def test_a_single_file(self):
        result = testing.replay(greeter(fail_on="bad"), self.file(2))
        self.assertEqual((result.files, result.compared), ([self.file(2)], 2))

    def test_one_subdirectory_per_controller(self):
        root = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.addCleanup(shutil.rmtree, root)
        shutil.copytree(self.dir, os.path.join(root, "greeter"))
        other = os.path.join(root, "other")
        os.mkdir(other)
        write(os.path.join(other, "00000001.ctrlrec"), header("other"), [])
        result = testing.replay(greeter(fail_on="bad"), root)  # the Controller's name
        self.assertEqual(result.files, [os.path.join(root, "greeter", "00000001.ctrlrec"),
                                        os.path.join(root, "greeter", "00000002.ctrlrec")])
        plugin = Plugin("greeter-py", "1.0.0")
        plugin.add(greeter(fail_on="bad"))
        self.assertEqual(testing.replay(plugin, root, controller="greeter").compared, 5)
        with self.assertRaisesRegex(testing.RecordingError, "^%s: holds recordings of several "
                                    "controllers \\(found: greeter, other\\): name one$" % root):
            testing.replay(plugin, root)
        with self.assertRaisesRegex(testing.RecordingError, "holds no recording of controller "
                                    "nope \\(found: greeter, other\\)"):
            testing.replay(plugin, root, controller="nope")

    def test_a_plugin_runs_the_controller_the_header_names(self):
        plugin = Plugin("greeter-py", "1.0.0")
        plugin.add(unrelated())
        plugin.add(greeter(fail_on="bad"))
        self.assertEqual(testing.replay(plugin, self.dir).differences, [])
        lonely = Plugin("other-py", "1.0.0")
        lonely.add(unrelated())
        with self.assertRaisesRegex(testing.RecordingError,
                                    '^plugin "other-py" has no controller "greeter"$'):
            testing.replay(lonely, self.dir)


class ReaderErrorTest(ReplayTestCase):
    def expect(self, path, message):
        with self.assertRaises(testing.RecordingError) as caught:
            testing.replay(greeter(fail_on="bad"), path)
        self.assertEqual(str(caught.exception), path + ": " + message)

    def test_wrong_magic(self):
        path = os.path.join(self.dir, "x.ctrlrec")
        with open(path, "wb") as f:
            f.write(b"CTRLREQ\n" + framed(header()))
        self.expect(path, "not a ctrlhost recording (no CTRLREC magic at offset 0)")

    def test_newer_format(self):
        path = write(os.path.join(self.dir, "x.ctrlrec"), header(fmt=2), [])
        self.expect(path, "recording format 2 is newer than this reader (it reads format 1)")

    def test_cut_short_inside_a_record(self):
        data = read(self.file(1))
        path = os.path.join(self.dir, "x.ctrlrec")
        recs = _records_of(self.file(1))
        last = len(data) - len(framed(recs[-1]))
        with open(path, "wb") as f:
            f.write(data[:-3])
        want = len(framed(recs[-1]))
        self.expect(path, "record at offset %d is cut short (%d of %d bytes): the recording "
                    "was interrupted" % (last, want - 3, want))

    def test_cut_short_inside_a_length(self):
        path = write(os.path.join(self.dir, "x.ctrlrec"), header(), [], extra=b"\x96")
        offset = len(MAGIC) + len(framed(header()))
        self.expect(path, "record at offset %d is cut short (1 of 2 bytes): the recording was "
                    "interrupted" % offset)

    def test_a_record_that_does_not_parse(self):
        # Field 4 (call) claims 5 bytes and has 2.
        path = write(os.path.join(self.dir, "x.ctrlrec"), header(), [],
                     extra=varint(4) + b"\x22\x05ab")
        offset = len(MAGIC) + len(framed(header()))
        self.expect(path, "record at offset %d is not a valid ReconcileRecord" % offset)

    def test_a_length_over_the_limit(self):
        path = write(os.path.join(self.dir, "x.ctrlrec"), header(), [],
                     extra=varint((256 << 20) + 1))
        offset = len(MAGIC) + len(framed(header()))
        self.expect(path, "record at offset %d claims 268435457 bytes, more than the limit of "
                    "268435456 bytes: the file is corrupt" % offset)

    def test_another_controller(self):
        path = write(os.path.join(self.dir, "x.ctrlrec"), header("other"), [])
        self.expect(path, "holds controller other, not greeter")

    def test_no_recording_files(self):
        empty = tempfile.mkdtemp(dir=self.dir)
        self.expect(empty, "holds no recording of controller greeter (none)")


class RedactionTest(unittest.TestCase):
    def patch(self, target, kind, type_, body):
        return pb.Patch(target=target, api_version="v1" if kind else "", kind=kind,
                        name="s" if kind else "", type=type_, patch=json.dumps(body).encode())

    def test_desired_secrets_and_secret_patches(self):
        response = pb.ReconcileResponse(
            desired_objects=[
                json.dumps({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                            "data": {"a": "x", "n": 5}, "stringData": {"b": "y"}}).encode(),
                json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                            "data": {"a": "x"}}).encode(),
                b"not json"],
            patches=[
                self.patch(pb.PATCH_TARGET_OWNED, "Secret", pb.PATCH_TYPE_JSON_PATCH,
                           [{"op": "add", "path": "/data", "value": {"a": "x"}},
                            {"op": "replace", "path": "/stringData/b", "value": "y"},
                            {"op": "add", "path": "/data/n", "value": 7},
                            {"op": "remove", "path": "/data/c"},
                            {"op": "add", "path": "/metadata/labels/a", "value": "x"}]),
                self.patch(pb.PATCH_TARGET_OWNED, "ConfigMap", pb.PATCH_TYPE_MERGE_PATCH,
                           {"data": {"a": "x"}}),
                self.patch(pb.PATCH_TARGET_PRIMARY, "", pb.PATCH_TYPE_MERGE_PATCH,
                           {"stringData": {"a": "x"}})])
        out = normalize(redact_response(response, primary_secret=False))
        self.assertEqual(out["desired"]["v1 Secret s"]["data"],
                         {"a": digest("x"), "n": "redacted"})
        self.assertEqual(out["desired"]["v1 Secret s"]["stringData"], {"b": digest("y")})
        self.assertEqual(out["desired"]["v1 ConfigMap "]["data"], {"a": "x"})
        self.assertEqual(out["desired"]["desired_objects[2]"], "not json")
        self.assertEqual([op.get("value") for op in out["patches"][0]["body"]],
                         [{"a": digest("x")}, digest("y"), "redacted", None, "x"])
        self.assertEqual(out["patches"][1]["body"], {"data": {"a": "x"}})
        self.assertEqual(out["patches"][2]["body"], {"stringData": {"a": "x"}})
        primary = normalize(redact_response(response, primary_secret=True))
        self.assertEqual(primary["patches"][2]["body"], {"stringData": {"a": digest("x")}})
        self.assertEqual(json.loads(response.desired_objects[0])["data"]["a"], "x")  # a copy

    def test_digest_is_of_the_utf8_bytes(self):
        response = pb.ReconcileResponse(desired_objects=[json.dumps(
            {"apiVersion": "v1", "kind": "Secret", "data": {"k": "h\u00e9"}}).encode()])
        out = normalize(redact_response(response, primary_secret=False))
        self.assertEqual(out["desired"]["v1 Secret "]["data"]["k"],
                         "sha256:" + hashlib.sha256("h\u00e9".encode("utf-8")).hexdigest())


class NormalizeTest(unittest.TestCase):
    def test_order_numbers_and_error_messages_do_not_count(self):
        a = pb.ReconcileResponse(desired_objects=[b'{"kind":"A","apiVersion":"v1"}',
                                                  b'{"apiVersion":"v1","kind":"B","n":1}'])
        a.error.kind = pb.ERROR_KIND_TERMINAL
        a.error.message = "at 12:00"
        b = pb.ReconcileResponse(desired_objects=[b'{"apiVersion":"v1","kind":"B","n":1.0}',
                                                  b'{"apiVersion":"v1","kind":"A"}'])
        b.error.kind = pb.ERROR_KIND_TERMINAL
        b.error.message = "at 12:01"
        self.assertEqual(json_diff(normalize(a), normalize(b)), [])
        b.error.reason = "Quota"
        self.assertEqual(json_diff(normalize(a), normalize(b)),
                         [{"op": "add", "path": "/error/reason", "value": "Quota"}])

    def test_true_is_not_one_and_empty_members_are_left_out(self):
        self.assertEqual(normalize(pb.ReconcileResponse()), {})
        a = pb.ReconcileResponse(status=b'{"x":true}')
        b = pb.ReconcileResponse(status=b'{"x":1}')
        self.assertEqual(json_diff(normalize(a), normalize(b)),
                         [{"op": "replace", "path": "/status/x", "value": 1}])

    def test_list_diffs_name_the_elements(self):
        self.assertEqual(json_diff({"e": [1, 2, 3]}, {"e": [1, 5]}),
                         [{"op": "replace", "path": "/e/1", "value": 5},
                          {"op": "remove", "path": "/e/2"}])
        self.assertEqual(json_diff([1], [1, 2]), [{"op": "add", "path": "/1", "value": 2}])


if __name__ == "__main__":
    bazel_unittest.main()
