"""kill -9 durability of `ctrlhost apiserver`: what was acknowledged survives, watches resume.

The server is killed with SIGKILL (no shutdown path runs) while a watcher is connected, then
restarted on the same data dir. Every write the server acknowledged must be there with the
same resourceVersion and uid; a watch from the last resourceVersion the watcher saw resumes
with exactly the events written after it; a watch from a compacted revision gets 410 Gone.
"""

import time
import unittest

from e2e.apiserver.apiserver_fixture import ApiServer, pending
from tools.internal import bazel_unittest

OBJECTS = 40
WAIT_SECONDS = 20
NS = "durable"
CMS = "/api/v1/namespaces/%s/configmaps" % NS


def configmap(name, value):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": {"value": value}}


class KillNineTest(unittest.TestCase):

    def test_acknowledged_writes_survive_and_watch_resumes(self):
        server = ApiServer.start()
        self.addCleanup(server.kill)
        api = server.api
        api.ensure_namespace(NS)
        status, listed = api.request("GET", CMS)
        self.assertEqual(status, 200, listed)
        watch = api.watch(CMS + "?watch=true&resourceVersion=" +
                          listed["metadata"]["resourceVersion"])
        self.addCleanup(watch.close)
        self.assertEqual(watch.status, 200)

        acknowledged = {}  # name -> (resourceVersion, uid, value) as the server answered
        for i in range(OBJECTS):
            name = "cm-%03d" % i
            status, body = api.request("POST", CMS, configmap(name, "v%d" % i))
            self.assertEqual(status, 201, body)
            acknowledged[name] = (body["metadata"]["resourceVersion"], body["metadata"]["uid"],
                                  "v%d" % i)
        # Updates and a delete are acknowledged writes as well.
        for i in range(0, OBJECTS, 4):
            name = "cm-%03d" % i
            status, body = api.request("PATCH", CMS + "/" + name, {"data": {"value": "p"}},
                                       content_type="application/merge-patch+json")
            self.assertEqual(status, 200, body)
            acknowledged[name] = (body["metadata"]["resourceVersion"], body["metadata"]["uid"],
                                  "p")
        status, body = api.request("DELETE", CMS + "/cm-001")
        self.assertEqual(status, 200, body)
        del acknowledged["cm-001"]

        # The watcher sees some prefix of the events; remember the last revision it saw.
        seen = watch.events_until(lambda e: e["object"]["metadata"]["name"] == "cm-010")
        last_seen = seen[-1]["object"]["metadata"]["resourceVersion"]
        revisions = [int(e["object"]["metadata"]["resourceVersion"]) for e in seen]
        self.assertEqual(revisions, sorted(revisions))

        server.kill()  # SIGKILL: no flush, no shutdown
        watch.close()
        restarted = ApiServer.start(data_dir=server.data_dir)
        self.addCleanup(restarted.kill)
        api = restarted.api

        status, listed = api.request("GET", CMS)
        self.assertEqual(status, 200, listed)
        after = {i["metadata"]["name"]: (i["metadata"]["resourceVersion"], i["metadata"]["uid"],
                                         i["data"]["value"]) for i in listed["items"]}
        self.assertEqual(after, acknowledged)
        for name, (rv, uid, _) in list(acknowledged.items())[:5]:
            status, body = api.request("GET", CMS + "/" + name)
            self.assertEqual((status, body["metadata"]["resourceVersion"],
                              body["metadata"]["uid"]), (200, rv, uid))

        # Writes after the restart get new, higher revisions (never reused).
        highest = max(int(rv) for rv, _, _ in acknowledged.values())
        status, created = api.request("POST", CMS, configmap("after-restart", "new"))
        self.assertEqual(status, 201, created)
        self.assertGreater(int(created["metadata"]["resourceVersion"]), highest)

        # A watch from the last revision the old watcher saw resumes with what came after it.
        resumed = api.watch(CMS + "?watch=true&resourceVersion=" + last_seen)
        self.addCleanup(resumed.close)
        self.assertEqual(resumed.status, 200)
        events = resumed.events_until(
            lambda e: e["object"]["metadata"]["name"] == "after-restart")
        names = [(e["type"], e["object"]["metadata"]["name"]) for e in events]
        self.assertNotIn(("ADDED", "cm-010"), names)  # already seen: not delivered twice
        self.assertEqual(names[0], ("ADDED", "cm-011"))
        self.assertIn(("DELETED", "cm-001"), names)
        self.assertEqual(names[-1], ("ADDED", "after-restart"))
        resumed_revisions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
        self.assertEqual(resumed_revisions, sorted(set(resumed_revisions)))
        self.assertGreater(resumed_revisions[0], int(last_seen))
        restarted.stop()

    @pending("compaction-interval")
    def test_watch_from_compacted_revision_gets_410(self):
        server = ApiServer.start(extra_args=["--compaction-retain-revisions", "5",
                                             "--compaction-interval", "100ms"])
        self.addCleanup(server.kill)
        api = server.api
        api.ensure_namespace(NS)
        first = None
        for i in range(30):
            status, body = api.request("POST", CMS, configmap("cm-%03d" % i, "x"))
            self.assertEqual(status, 201, body)
            first = first or body["metadata"]["resourceVersion"]
        # Compaction runs in the background: poll (bounded) until the old revision is gone.
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            watch = api.watch(CMS + "?watch=true&resourceVersion=" + first)
            if watch.status == 410:
                body = watch.body()
                watch.close()
                break
            if watch.status == 200:
                # Some servers report expiry as an ERROR event in the stream instead.
                event = watch.next_event(2)
                watch.close()
                if event and event["type"] == "ERROR":
                    body = event["object"]
                    break
            else:
                watch.close()
            self.assertLess(time.monotonic(), deadline, "the revision was never compacted")
            time.sleep(0.1)  # polling an observable condition, not waiting for time
        self.assertEqual((body["kind"], body["code"], body["reason"]), ("Status", 410, "Expired"))
        # The recovery path a client takes: relist, then watch from the list's revision.
        status, listed = api.request("GET", CMS)
        self.assertEqual((status, len(listed["items"])), (200, 30))
        watch = api.watch(CMS + "?watch=true&resourceVersion=" +
                          listed["metadata"]["resourceVersion"])
        self.addCleanup(watch.close)
        self.assertEqual(watch.status, 200)
        api.request("POST", CMS, configmap("fresh", "y"))
        events = watch.events_until(lambda e: e["object"]["metadata"]["name"] == "fresh")
        self.assertEqual([e["type"] for e in events], ["ADDED"])
        server.stop()


if __name__ == "__main__":
    bazel_unittest.main()
