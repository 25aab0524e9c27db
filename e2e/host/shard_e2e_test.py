"""End to end: one controller's keys sharded across three hosts (`ctrlhost run --shard-ring`,
`sharding: {enabled: true}`), against a standalone embedded API server (`ctrlhost apiserver`: the
hosts must be able to die without taking the server with them) and against real Kubernetes 1.20
(shard_kube_e2e_test).

Three hosts run the chaos plugin in one ring while a stream of updates goes to the Chaos
objects: the keys spread within +/-15 % of even (each host's shardKeysOwned in /debug/dump),
and each host caches only its shard (the Chaos objects it owns, filtered by the embedded server
or, against Kubernetes 1.20, by the host; the child ConfigMaps of those, filtered by the host),
also after each hand-off;
kill -9 of one host: the two others take its keys over once its Lease expired; a fourth host
joins: it gets its share. Every object converges to its last update (no key lost), and the
chaos plugin's record log ("<key> <attempt> start|end <host> <pid>", appended with O_APPEND by
every host's plugin to one file, so its order is the order of the events) shows no key
reconciled by two hosts at once.

Short timings (leaseDuration 4 s, renewDeadline 3 s, retryPeriod 1 s) keep the test well under
a minute on a loaded 2-core machine; OBJECTS is 600 against the embedded server and 300 against
the real one (whose writes are slower); CTRLHOST_SHARD_OBJECTS sets another size (the issue's
3,000: `bazel test //e2e/host:shard_e2e_test --test_env=CTRLHOST_SHARD_OBJECTS=3000`; its
figures are in docs/operations.md), and the waits for every object scale with it. The bound for a dead host's keys is the guarantee of
docs/operations.md: leaseDuration + 2 s.
"""

import math
import os
import tempfile
import threading
import time

import yaml

from e2e.host import host_fixture
from tools.internal import bazel_unittest

OBJECTS = int(os.environ.get("CTRLHOST_SHARD_OBJECTS") or
              (300 if host_fixture.real_kube() else 600))
# The waits for every object: 60 s at the CI sizes, more for a bigger run.
CONVERGE_TIMEOUT = max(60, OBJECTS // 10)
LEASE_DURATION = 4
RENEW_DEADLINE = 3
RETRY_PERIOD = 1

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
          CHAOS_VERSION: {host}
          CHAOS_LOG_DELETED: "1"
  controllers:
    - name: chaos
      maxConcurrentReconciles: 4
      sharding: {{enabled: true}}
"""


BUCKET_LABEL = "ctrlhost.dev/shard-bucket"


def bucket_of(uid):
    """The shard bucket of `uid`: the top 8 bits of its FNV-1a 64 hash."""
    h = 0xcbf29ce484222325
    for b in uid.encode():
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h >> 56


class ShardingTest(host_fixture.ChaosServerTest):
    wait_interval = 0.1  # each poll reads three hosts' /debug/dump

    def setUp(self):
        self.ring = self.id().split(".")[-1].replace("_", "-")[:40]
        self.namespace = self.ring
        self.dir = tempfile.mkdtemp(prefix="shard-", dir=os.environ.get("TEST_TMPDIR"))
        self.api.ensure_namespace(self.namespace)
        self.hosts = []

    def tearDown(self):
        for host in self.hosts:
            host.kill()

    def start(self, name):
        host = host_fixture.Host.start(
            OPERATOR.format(chaos=self.chaos, dir=self.dir, host=name),
            kubeconfig=self.kubeconfig,
            extra_args=["--shard-ring", self.ring,
                        "--leader-elect-resource-namespace", self.namespace,
                        "--leader-elect-identity", name,
                        "--leader-elect-lease-duration", "%ds" % LEASE_DURATION,
                        "--leader-elect-renew-deadline", "%ds" % RENEW_DEADLINE,
                        "--leader-elect-retry-period", "%ds" % RETRY_PERIOD])
        self.hosts.append(host)
        return host

    @staticmethod
    def dump(host):
        status, text = host.endpoint("/debug/dump")
        assert status == 200, text
        return yaml.safe_load(text)

    def ring_state(self, host):
        """(members, adopted view, keys owned) of `host`."""
        dump = self.dump(host)
        ring = dump.get("shardRing", {})
        owned = None
        for plugin in dump.get("plugins", []):
            for controller in plugin.get("controllers") or []:
                if controller.get("name") == "chaos":
                    owned = controller.get("shardKeysOwned")
        return ring.get("members"), ring.get("adoptedView"), owned

    def buckets(self, host):
        """How many of the 256 hash buckets `host` owns (its dump's "85 of 256")."""
        return int(str(self.dump(host).get("shardRing", {}).get("buckets", "0")).split()[0])

    def cache_state(self, host):
        """{kind: (shard mode, objects cached)} of `host`'s sharded watches."""
        out = {}
        for w in self.dump(host).get("watches") or []:
            if not w.get("shard"):
                continue
            kind = next((k for k in ("Chaos", "ConfigMap") if " %s" % k in w["watch"]),
                        w["watch"])
            out[kind] = (w["shard"]["mode"], w["objects"])
        return out

    def caches_divided(self, hosts):
        """True once each host caches exactly the Chaos objects it owns (so that together they
        cache each one once)."""
        for host in hosts:
            _, _, owned = self.ring_state(host)
            cached = self.cache_state(host).get("Chaos", (None, None))[1]
            if owned is None or cached != owned:
                return False
        return True

    def unowned_configmaps(self):
        status, body = self.api.request("GET", "/api/v1/configmaps")
        assert status == 200, body
        return sum(1 for cm in body["items"]
                   if not any(o.get("controller") for o in
                              cm["metadata"].get("ownerReferences") or []))

    def primary_mode(self):
        """How the Chaos caches are restricted: by the server's shard selector where it has
        one (the embedded server by default), else by the label the ring's labeller writes."""
        return "label" if host_fixture.real_kube() or self.apiserver_args else "server"

    def chaos_object(self, name):
        status, body = self.api.request(
            "GET", "/apis/e2e.ctrlhost.dev/v1/namespaces/%s/chaos/%s" % (self.namespace, name))
        assert status == 200, body
        return body

    def label_patch(self, name, value):
        status, body = self.api.request(
            "PATCH", "/apis/e2e.ctrlhost.dev/v1/namespaces/%s/chaos/%s" % (self.namespace, name),
            {"metadata": {"labels": {BUCKET_LABEL: value}}}, "application/merge-patch+json")
        assert status == 200, body

    def tamper(self, removed, wrong):
        """Someone else removes one object's bucket label and writes another's wrong: both
        are labelled right again, and changes to both are still reconciled by their owners
        (never as deletions: checked at the end of the test)."""
        self.label_patch(removed, None)
        uid = self.chaos_object(wrong)["metadata"]["uid"]
        self.label_patch(wrong, str((bucket_of(uid) + 1) % 256))
        for name in (removed, wrong):
            self.assertIn(self.put_chaos(name, "tampered"), (200, 201))

        def labelled_right():
            for name in (removed, wrong):
                body = self.chaos_object(name)
                value = body["metadata"].get("labels", {}).get(BUCKET_LABEL)
                if value != str(bucket_of(body["metadata"]["uid"])):
                    return False
            return True
        self.wait(labelled_right, "the labeller puts the right buckets back", timeout=30)
        self.wait(lambda: all(self.child_values().get(n) == "tampered" for n in (removed, wrong)),
                  "the tampered objects' changes reconciled", timeout=30)
        # Put the objects back as the rest of the test expects them.
        for name in (removed, wrong):
            self.assertIn(self.put_chaos(name, 0), (200, 201))
        self.wait(lambda: all(self.child_values().get(n) == "0" for n in (removed, wrong)),
                  "the tampered objects back to 0", timeout=30)

    def settled(self, hosts, names):
        """True once every host in `hosts` has the same members (`names`), adopted them, and
        the keys they own add up to OBJECTS."""
        total = 0
        for host in hosts:
            members, adopted, owned = self.ring_state(host)
            if members != sorted(names) or adopted != sorted(names) or owned is None:
                return False
            total += owned
        return total == OBJECTS

    def put_chaos(self, name, value):
        body = {"apiVersion": "e2e.ctrlhost.dev/v1", "kind": "Chaos",
                "metadata": {"name": name, "namespace": self.namespace},
                "spec": {"mode": "ok", "data": {"value": str(value)}}}
        status, _ = self.api.request(
            "PATCH", "/apis/e2e.ctrlhost.dev/v1/namespaces/%s/chaos/%s"
            "?fieldManager=e2e&force=true" % (self.namespace, name), body,
            "application/apply-patch+yaml")
        return status

    def child_values(self):
        status, body = self.api.request(
            "GET", "/api/v1/namespaces/%s/configmaps?labelSelector=chaos%%3Dchild" % self.namespace)
        assert status == 200, body
        return {item["metadata"]["name"]: item.get("data", {}).get("value")
                for item in body.get("items", [])}

    def records(self):
        """The chaos log of this test's namespace: [(key, what, host)] in append order."""
        return host_fixture.chaos_records(self.dir, self.namespace)

    def check_exclusive(self, records):
        """No key started on a host while another host (or the same) was running it."""
        running = {}
        overlaps = []
        for key, what, host in records:
            if what == "start":
                if running.get(key):
                    overlaps.append((key, running[key], host))
                running[key] = host
            elif what in ("end", "cancelled") and running.get(key) == host:
                running[key] = None
        # A host killed mid-reconcile never logs "end": its keys stay "running" on it, so a
        # start elsewhere after the kill is counted; those are told apart by the caller.
        return overlaps

    def test_three_hosts_kill_one_add_one(self):
        names = ["k%04d" % i for i in range(OBJECTS)]
        for name in names:
            self.assertIn(self.put_chaos(name, 0), (200, 201))
        a = self.start("shard-a")
        b = self.start("shard-b")
        c = self.start("shard-c")
        hosts = [a, b, c]
        self.wait(lambda: self.settled(hosts, ["shard-a", "shard-b", "shard-c"]),
                  "three hosts agree on the ring", timeout=30)
        owned = {name: self.ring_state(h)[2] for name, h in zip("abc", hosts)}
        buckets = {name: self.buckets(h) for name, h in zip("abc", hosts)}
        print("keys owned with 3 hosts:", owned, "buckets:", buckets)
        # The hash space is dealt evenly, to one bucket.
        self.assertEqual(sorted(buckets.values()), [85, 85, 86], buckets)
        # The keys follow their uids' hashes, and the uids are random: a host's count is binomial
        # around its share (at 300 objects, 100 +- 8.2 for one standard deviation; a +-15 % bound
        # failed one correct run in ten). Five deviations: a correct ring misses it about once in
        # a million runs, a skewed hash or a host that owns the wrong keys does not pass it.
        for name, n in owned.items():
            share = buckets[name] / 256
            deviation = math.sqrt(OBJECTS * share * (1 - share))
            self.assertLessEqual(abs(n - OBJECTS * share), 5 * deviation, (owned, buckets))
        self.assertEqual(b.metric("ctrlhost_shard_keys_owned"),
                         owned["b"])
        _, ready = c.endpoint("/readyz?verbose")
        self.assertIn("[+]shard-ring ok: member of shard ring %s (3 members" % self.ring, ready)
        self.wait(lambda: all(v == "0" for v in self.child_values().values()) and
                  len(self.child_values()) == OBJECTS, "every object reconciled once",
                  timeout=CONVERGE_TIMEOUT)
        # Each host caches only its shard: the server filters the primaries where it can (the
        # embedded server implements KEP-5866's shard selector; Kubernetes 1.20 ignores it, so
        # the host filters), the host filters the children by their owner.
        self.wait(lambda: self.caches_divided(hosts), "each host caches only its shard",
                  timeout=30)
        caches = {name: self.cache_state(h) for name, h in zip("abc", hosts)}
        print("sharded caches with 3 hosts ({kind: (mode, objects)}):", caches)
        primary_mode = self.primary_mode()
        for name, cache in caches.items():
            self.assertEqual(cache["Chaos"][0], primary_mode, caches)
            self.assertEqual(cache["ConfigMap"][0], "client", caches)
        # ConfigMaps without a controller (kube-root-ca.crt in every namespace of a real cluster)
        # are hashed by their own uid: each is cached by one host too.
        unowned = self.unowned_configmaps()
        self.wait(lambda: sum(self.cache_state(h)["ConfigMap"][1] for h in hosts) ==
                  OBJECTS + unowned, "each child cached once, by its owner's host", timeout=30)
        if primary_mode == "label":
            self.tamper(names[1], names[2])

        stop = threading.Event()
        last = {name: 0 for name in names}
        errors = []

        def updater():
            value = 0
            while not stop.is_set():
                value += 1
                for name in names[::7]:
                    if stop.is_set():
                        return
                    status = self.put_chaos(name, value)
                    if status not in (200, 201):
                        errors.append((name, status))
                    last[name] = value
                time.sleep(0.05)

        thread = threading.Thread(target=updater)
        thread.start()
        try:
            time.sleep(1)
            c.kill()
            killed_records = len(self.records())
            killed = time.monotonic()
            self.wait(lambda: self.ring_state(a)[0] == ["shard-a", "shard-b"] and
                      self.ring_state(b)[0] == ["shard-a", "shard-b"],
                      "shard-c gone from the ring", timeout=LEASE_DURATION + 2 + 1)
            print("kill -9: shard-c left the others' ring %.1fs after the kill" %
                  (time.monotonic() - killed))
            self.wait(lambda: self.settled([a, b], ["shard-a", "shard-b"]),
                      "two hosts own every key", timeout=10)
            d = self.start("shard-d")
            self.wait(lambda: self.settled([a, b, d], ["shard-a", "shard-b", "shard-d"]),
                      "shard-d joined", timeout=30)
            self.assertGreater(self.ring_state(d)[2], 0)
            # The hand-offs moved the caches too: the old owners dropped what they gave away.
            self.wait(lambda: self.caches_divided([a, b, d]), "the caches follow the ring",
                      timeout=30)
            time.sleep(1)
        finally:
            stop.set()
            thread.join(60)
        self.assertEqual(errors, [])
        def unconverged():
            values = self.child_values()
            return [n for n in names if values.get(n) != str(last[n])]
        self.wait(lambda: not unconverged(), "every object converged", timeout=CONVERGE_TIMEOUT)
        records = self.records()
        hosts_seen = {r[2] for r in records[killed_records:] if r[1] == "start"}
        self.assertIn("shard-d", hosts_seen)
        # shard-c was killed: a reconcile it had begun never ended, and the key's next start
        # elsewhere is not an overlap. Every other one is.
        overlaps = [o for o in self.check_exclusive(records) if o[1] != "shard-c"]
        self.assertEqual(overlaps, [])
        # No object was deleted: no host ever reconciled one as gone (an object leaving a
        # host's cache on a hand-off, or its label selector by a label change, is not gone).
        self.assertEqual([r for r in records if r[1] == "deleted"], [])
        # After the kill, shard-c reconciled nothing more (it is dead), and every key ran
        # on a host that owned it: the three live hosts' records are disjoint at any instant.
        for host in (a, b, d):
            self.assertEqual(host.stop(), 0, host.log()[-4000:])
            self.assertIn("shard ring: left the ring", host.log())


class ShardingByLabelsTest(ShardingTest):
    """The same against an embedded server with KEP-5866 off (`--feature-gates
    ShardedListAndWatch=false`, as Kubernetes before 1.36): the ring's labeller labels the
    objects with their bucket and each host watches its buckets with a label selector. Against
    real Kubernetes 1.20 the class above already runs that way."""

    apiserver_args = ("--feature-gates", "ShardedListAndWatch=false")

    def setUp(self):
        if host_fixture.real_kube():
            self.skipTest("ShardingTest runs the label path against real Kubernetes 1.20")
        super().setUp()


if __name__ == "__main__":
    bazel_unittest.main()
