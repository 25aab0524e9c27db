"""Faults of the machine under `ctrlhost apiserver`, against the real binary (issue 14).

- kill -9 during bursts of creates and updates, 20 rounds on one data dir: every acknowledged
  write is there afterwards (same value, resourceVersion and uid, or a later write of the same
  writer that was in flight at the kill), nothing half-written, nothing nobody wrote.
- no room to write (RLIMIT_FSIZE on the server process stands in for a full disk: no
  privileges, no mounts): 429 naming the cause, nothing of the refused write stored, reads go
  on, writes resume once there is room, no acknowledged write lost across a kill -9.
- corrupt database: a file that is not a database, an empty state.db next to an existing
  identity, and a flipped byte inside a stored value (answered 500 naming the key, never
  broken JSON; deleting the object repairs the namespace).

Every server runs on 127.0.0.1 port 0 in a temp data dir, is killed by PID at exit, and every
loop is bounded by a count and a deadline.
"""

import http.client
import os
import random
import resource
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from e2e.apiserver.apiserver_fixture import ApiServer, binary_path, temp_root
from tools.internal import bazel_unittest

ROUNDS = 20
WRITERS = 3
ACKS_PER_ROUND = 30  # acknowledged writes in a round before the kill (the burst goes on)
ROUND_SECONDS = 60
START_SECONDS = 20
NS = "faults"
CMS = "/api/v1/namespaces/%s/configmaps" % NS


def configmap(name, value, size=0):
    data = {"value": value}
    if size:
        data["fill"] = "x" * size
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def list_objects(api):
    status, listed = api.request("GET", CMS)
    if status != 200:
        raise AssertionError("list after restart: %s %s" % (status, listed))
    return {i["metadata"]["name"]: i for i in listed["items"]}


class Writer(threading.Thread):
    """Creates and updates its own ConfigMaps (names w<id>-<n>) one request at a time until
    stopped, recording what the server acknowledged and what was in flight when it failed."""

    def __init__(self, api, writer_id, round_number, acked, seed):
        super().__init__(daemon=True)
        self.api = api
        self.writer_id = writer_id
        self.round_number = round_number
        self.acked = acked  # name -> (value, resourceVersion, uid); shared, one writer per name
        self.in_doubt = {}  # name -> value sent without an answer (at most one per writer)
        self.acks = 0
        self.unexpected = []
        self.stop = threading.Event()
        self.random = random.Random(seed)

    def run(self):
        n = 0
        mine = [name for name in self.acked if name.startswith("w%d-" % self.writer_id)]
        while not self.stop.is_set():
            n += 1
            value = "r%d-%d" % (self.round_number, n)
            if mine and self.random.random() < 0.5:
                name = self.random.choice(mine)
                method, path, body = "PATCH", CMS + "/" + name, {"data": {"value": value}}
                content_type, expected = "application/merge-patch+json", 200
            else:
                name = "w%d-r%d-%d" % (self.writer_id, self.round_number, n)
                method, path, body = "POST", CMS, configmap(name, value)
                content_type, expected = "application/json", 201
            try:
                status, answer = self.api.request(method, path, body, content_type=content_type)
            except (OSError, http.client.HTTPException):  # the server was killed: this write may or may not have committed
                self.in_doubt[name] = value
                return
            if status != expected:
                self.unexpected.append((method, name, status, answer))
                return
            self.acked[name] = (value, answer["metadata"]["resourceVersion"],
                                answer["metadata"]["uid"])
            self.acks += 1
            if method == "POST":
                mine.append(name)


class KillNineLoopTest(unittest.TestCase):

    def test_no_acknowledged_write_is_lost_over_20_kills_during_bursts(self):
        server = ApiServer.start()
        self.addCleanup(server.kill)
        data_dir = server.data_dir
        server.api.ensure_namespace(NS)
        acked = {}
        total_acks = applied_in_doubt = 0
        for round_number in range(ROUNDS):
            api = server.api
            writers = [Writer(api, w, round_number, acked, round_number * WRITERS + w)
                       for w in range(WRITERS)]
            for w in writers:
                w.start()
            deadline = time.monotonic() + ROUND_SECONDS
            while sum(w.acks for w in writers) < ACKS_PER_ROUND and \
                    any(w.is_alive() for w in writers):
                self.assertLess(time.monotonic(), deadline, "round %d: too few writes acknowledged"
                                % round_number)
                time.sleep(0.01)  # polling the writers' counters
            server.kill()  # SIGKILL in the middle of the burst: no flush, no shutdown
            for w in writers:
                w.stop.set()
            for w in writers:
                w.join(ROUND_SECONDS)
                self.assertFalse(w.is_alive(), "a writer did not stop")
                self.assertEqual(w.unexpected, [], "round %d" % round_number)
            total_acks += sum(w.acks for w in writers)

            server = ApiServer.start(data_dir=data_dir)
            self.addCleanup(server.kill)
            stored = list_objects(server.api)
            in_doubt = {}
            for w in writers:
                in_doubt.update(w.in_doubt)
            lost = []
            for name, (value, rv, uid) in acked.items():
                item = stored.get(name)
                if item is None:
                    lost.append((name, "missing"))
                    continue
                got = (item["data"].get("value"), item["metadata"]["resourceVersion"],
                       item["metadata"]["uid"])
                if got == (value, rv, uid):
                    continue
                # A later update of the same object was in flight at the kill and committed.
                if in_doubt.get(name) == got[0] and got[2] == uid and int(got[1]) > int(rv):
                    continue
                lost.append((name, "acknowledged %s, stored %s" % ((value, rv, uid), got)))
            self.assertEqual(lost, [], "round %d: acknowledged writes lost" % round_number)
            for name, item in stored.items():
                # Nothing half-written, nothing that no writer sent.
                self.assertIn(name, set(acked) | set(in_doubt), "round %d" % round_number)
                value = item["data"].get("value")
                self.assertIn(value, {acked.get(name, (None,))[0], in_doubt.get(name)},
                              "round %d: %s" % (round_number, name))
                self.assertEqual(set(item["data"]), {"value"})
                int(item["metadata"]["resourceVersion"])
                if acked.get(name, (None,))[0] != value:
                    applied_in_doubt += 1
                acked[name] = (value, item["metadata"]["resourceVersion"],
                               item["metadata"]["uid"])
        print("kill -9 loop: %d rounds, %d acknowledged writes, 0 lost, %d unanswered writes "
              "found committed, %d objects" % (ROUNDS, total_acks, applied_in_doubt, len(acked)),
              file=sys.stderr)
        server.stop()


class NoRoomTest(unittest.TestCase):

    def test_no_room_to_write_is_429_and_recovers_without_losing_writes(self):
        # The server itself ignores SIGXFSZ: a write past RLIMIT_FSIZE fails with EFBIG (as a full
        # disk fails with ENOSPC) instead of killing it.
        server = ApiServer.start()
        self.addCleanup(server.kill)
        api = server.api
        api.ensure_namespace(NS)
        acked = {}
        for i in range(5):
            status, body = api.request("POST", CMS, configmap("before-%d" % i, "b%d" % i))
            self.assertEqual(status, 201, body)
            acked["before-%d" % i] = body["metadata"]["resourceVersion"]

        # Room for a few more writes only: the soft limit a little above the largest file of
        # the data dir (the hard limit stays, so the limit can be raised again).
        largest = max(os.path.getsize(os.path.join(server.data_dir, f))
                      for f in os.listdir(server.data_dir))
        limit = largest + (2 << 20)
        resource.prlimit(server.process.pid, resource.RLIMIT_FSIZE,
                         (limit, resource.RLIM_INFINITY))
        refused = None
        for i in range(40):
            name = "big-%d" % i
            status, body = api.request("POST", CMS, configmap(name, "x", size=256 << 10))
            if status == 201:
                acked[name] = body["metadata"]["resourceVersion"]
                continue
            refused = (name, status, body)
            break
        self.assertIsNotNone(refused, "writes never ran out of room")
        name, status, body = refused
        self.assertEqual((status, body["kind"], body["reason"]), (429, "Status", "TooManyRequests"),
                         body)
        self.assertIn("no room to write", body["message"])
        self.assertIn("file size limit", body["message"])
        # Reads go on; the refused write is not there.
        self.assertEqual(api.request("GET", CMS + "/" + name)[0], 404)
        self.assertEqual(api.request("GET", CMS + "/before-0")[0], 200)
        self.assertTrue(server.alive())

        resource.prlimit(server.process.pid, resource.RLIMIT_FSIZE,
                         (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        status, body = api.request("POST", CMS, configmap("after-room", "a"))
        self.assertEqual(status, 201, body)
        acked["after-room"] = body["metadata"]["resourceVersion"]

        server.kill()
        restarted = ApiServer.start(data_dir=server.data_dir)
        self.addCleanup(restarted.kill)
        stored = {n: i["metadata"]["resourceVersion"]
                  for n, i in list_objects(restarted.api).items()}
        self.assertEqual(stored, acked)
        restarted.stop()


class CorruptDatabaseTest(unittest.TestCase):

    def start_refused(self, data_dir):
        """Runs the server on `data_dir` expecting it to refuse: returns its stderr."""
        result = subprocess.run(
            [binary_path(), "apiserver", "--data-dir", data_dir, "--port", "0"],
            capture_output=True, text=True, timeout=START_SECONDS, stdin=subprocess.DEVNULL)
        self.assertNotEqual(result.returncode, 0, "started on a corrupt data dir:\n" +
                            result.stdout + result.stderr)
        self.assertNotIn("API server listening", result.stdout)
        return result.stderr

    def test_a_file_that_is_not_a_database_is_refused_with_a_clear_error(self):
        data_dir = tempfile.mkdtemp(prefix="not-a-database-", dir=temp_root())
        with open(os.path.join(data_dir, "state.db"), "wb") as f:
            f.write(b"these bytes are not an SQLite database\n" * 200)
        stderr = self.start_refused(data_dir)
        self.assertIn("state.db", stderr)
        self.assertIn("not a database", stderr)

    def test_an_empty_state_db_next_to_an_existing_identity_is_refused(self):
        server = ApiServer.start()
        self.addCleanup(server.kill)
        server.api.ensure_namespace(NS)
        server.stop()
        for suffix in ("-wal", "-shm"):
            path = os.path.join(server.data_dir, "state.db" + suffix)
            if os.path.exists(path):
                os.remove(path)
        os.truncate(os.path.join(server.data_dir, "state.db"), 0)
        stderr = self.start_refused(server.data_dir)
        self.assertIn("is empty (0 bytes)", stderr)

    def test_a_flipped_byte_in_a_stored_value_is_500_naming_the_key(self):
        server = ApiServer.start()
        self.addCleanup(server.kill)
        api = server.api
        api.ensure_namespace(NS)
        marker = "MARKER-%d" % os.getpid()
        for name, value in (("victim", marker), ("healthy", "fine")):
            status, body = api.request("POST", CMS, configmap(name, value))
            self.assertEqual(status, 201, body)
        self.assertEqual(server.stop(), 0)
        # Move everything into the main file (a flipped byte in a WAL frame is SQLite's own
        # business: its frame checksums drop the frame), then flip one byte of the value.
        db_path = os.path.join(server.data_dir, "state.db")
        connection = sqlite3.connect(db_path)
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        connection.close()
        with open(db_path, "r+b") as f:
            content = f.read()
            offsets = []
            at = content.find(marker.encode())
            while at >= 0:
                offsets.append(at)
                at = content.find(marker.encode(), at + 1)
            self.assertTrue(offsets, "the value is not in state.db")
            for at in offsets:
                f.seek(at)
                f.write(b"N")  # "MARKER" -> "NARKER": still valid JSON, different bytes
        restarted = ApiServer.start(data_dir=server.data_dir)
        self.addCleanup(restarted.kill)
        api = restarted.api
        for path in (CMS + "/victim", CMS):
            status, body = api.request("GET", path)
            self.assertEqual((status, body["kind"], body["reason"]),
                             (500, "Status", "InternalError"), body)
            self.assertIn("/%s/victim is corrupt" % NS, body["message"])
        self.assertEqual(api.request("GET", CMS + "/healthy")[0], 200)
        self.assertIn("checksum", restarted.stderr())
        # Deleting the corrupt object repairs the namespace.
        self.assertEqual(api.request("DELETE", CMS + "/victim")[0], 200)
        self.assertEqual(sorted(list_objects(api)), ["healthy"])
        restarted.stop()


if __name__ == "__main__":
    bazel_unittest.main()
