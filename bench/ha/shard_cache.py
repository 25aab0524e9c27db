"""The sharded-cache part of `tools/bench ha` (`--only=shard-cache`): what each host of one
ring caches and receives when 1, 2, then 3 hosts share a controller's keys, and what moves when
a fourth joins, on the same objects in the same run.

Workload: OBJECTS Chaos objects (30,000) in one namespace, created before the first host starts,
with spec.mode "slow" and sleepMs 0: a reconcile writes nothing, so what is measured is the
caches and the watches, not the plugin. Hosts (`ctrlhost run --shard-ring`, the chaos controller
with `sharding: {enabled: true}`) join one at a time and stay. After each join, once the ring
settled and each host caches exactly the Chaos objects it owns:
- cache bytes per host: the Chaos watch's memoryBytes in /debug/dump, the largest host's, as a
  ratio to the single host's (target at 3 hosts: <= 0.4x). Where the server has no shard
  selector (Kubernetes 1.20) the first host labels every object with its bucket; the single
  host's figures are read once every object is labelled;
- watch events per host: UPDATES objects are patched (one request each, spread over the whole
  hash space); each host's Chaos watch eventsTotal growth until every host has seen every
  update of its own shard, the largest host's as a ratio to the single host's (target at 3
  hosts: <= 0.4x). The embedded server filters by the shard selector (KEP-5866), so a host
  receives only its shard's events;
- when a fourth host joins: the share of the objects whose owner changed, computed from every
  host's published hash ranges (`shardRing.hashRanges`) before and after and the objects'
  uids (target: within 10 % of 1/4), and the objects that two hosts' ranges both hold (target
  0: no key on two hosts).
The hosts run with the default ring timings (15 / 10 / 2 s) and `--kube-api-qps 0`.
"""

import os
import tempfile
import time

import yaml

from bench.ha import sharding
from e2e.host import host_fixture

OBJECTS = int(os.environ.get("CTRLHOST_SHARD_CACHE_OBJECTS") or 30000)
UPDATES = 3000
NAMESPACE = "ha-shard-cache"

# The sharding part's operator: the chaos controller, sharded, maxConcurrentReconciles 4.
OPERATOR = sharding.OPERATOR


def fnv1a64(text):
    h = 0xcbf29ce484222325
    for b in text.encode():
        h ^= b
        h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def _ranges(texts):
    """[(start, end)] from the dump's "0x..-0x.." strings."""
    out = []
    for text in texts or []:
        start, end = text.split("-")
        out.append((int(start, 16), int(end, 16)))
    return out


def _put(api, name, value):
    body = {"apiVersion": "e2e.ctrlhost.dev/v1", "kind": "Chaos",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"mode": "slow", "sleepMs": 0, "data": {"value": str(value)}}}
    status, _ = api.request("PATCH", "/apis/e2e.ctrlhost.dev/v1/namespaces/%s/chaos/%s"
                            "?fieldManager=bench&force=true" % (NAMESPACE, name), body,
                            "application/apply-patch+yaml")
    assert status in (200, 201), status


class _State:
    """What one host's /debug/dump says about the ring and its Chaos cache."""

    def __init__(self, host):
        status, text = host.endpoint("/debug/dump")
        assert status == 200, text
        dump = yaml.safe_load(text)
        ring = dump.get("shardRing") or {}
        self.members = ring.get("members") or []
        self.settled = bool(self.members) and self.members == ring.get("adoptedView")
        self.ranges = _ranges(ring.get("hashRanges"))
        self.owned = None
        for plugin in dump.get("plugins") or []:
            for controller in plugin.get("controllers") or []:
                if controller.get("name") == "chaos":
                    self.owned = controller.get("shardKeysOwned")
        self.cached = self.memory = self.events = None
        self.mode = None
        for w in dump.get("watches") or []:
            if " Chaos" in w.get("watch", "") and w.get("shard"):
                self.cached, self.memory = w.get("objects"), w.get("memoryBytes")
                self.events, self.mode = w.get("eventsTotal"), w["shard"].get("mode")


def _settle(hosts, names, total, timeout=900):
    """The hosts' states once they agree on `names`, each caches exactly what it owns, and
    together they own `total` objects."""
    deadline = time.monotonic() + timeout
    while True:
        states = [_State(h) for h in hosts]
        if all(s.settled and s.members == names and s.owned is not None and
               s.cached == s.owned for s in states) and sum(s.owned for s in states) == total:
            return states
        assert time.monotonic() < deadline, "the ring never settled: %s" % [
            (s.members, s.settled, s.owned, s.cached) for s in states]
        time.sleep(0.2)


def _wait_labelled(api, host, timeout=900):
    """Where the server has no shard selector, the first host labels every object: the single
    host's figures are read once that is done (its cache holds the labels then, as the others'
    will, and the labels' own events are not counted as the updates')."""
    status, text = host.endpoint("/debug/dump")
    assert status == 200, text
    labeler = (yaml.safe_load(text).get("shardRing") or {}).get("labeler") or {}
    if not any(k.endswith(": labelling") for k in labeler.get("kinds") or []):
        return
    started = time.monotonic()
    while True:
        # resourceVersion=0: served from the watch cache (a paged, label-selected list of
        # 30,000 objects goes to etcd and outlasts the client's timeout on a busy machine).
        status, body = api.request(
            "GET", "/apis/e2e.ctrlhost.dev/v1/namespaces/%s/chaos?resourceVersion=0&"
            "labelSelector=%%21ctrlhost.dev%%2Fshard-bucket" % NAMESPACE)
        assert status == 200, body
        if not body["items"]:
            break
        assert time.monotonic() - started < timeout, "objects still unlabelled"
        time.sleep(1)
    print("# shard-cache: every object labelled %.0f s after the first host started" %
          (time.monotonic() - started))
    time.sleep(2)  # the last labels' events reach the host


def _owner(states, names, h):
    owners = [n for n, s in zip(names, states) if any(a <= h < b for a, b in s.ranges)]
    return owners


def _events_round(api, hosts, states, value, uids):
    """Largest per-host growth of Chaos watch events while UPDATES objects are patched."""
    before = [s.events for s in states]
    step = max(1, OBJECTS // UPDATES)
    updated = ["c%05d" % i for i in range(0, OBJECTS, step)][:UPDATES]
    for name in updated:
        _put(api, name, value)
    # Each host must see the updates of its own shard: wait until the total seen covers them.
    expected = [sum(1 for n in updated if any(a <= fnv1a64(uids[n]) < b for a, b in s.ranges))
                for s in states]
    deadline = time.monotonic() + 120
    while True:
        now = [_State(h).events for h in hosts]
        grown = [n - b for n, b in zip(now, before)]
        if all(g >= e for g, e in zip(grown, expected)):
            time.sleep(1)  # let stragglers arrive, then read once more
            now = [_State(h).events for h in hosts]
            return max(n - b for n, b in zip(now, before)), len(updated)
        assert time.monotonic() < deadline, "updates not seen: %s vs %s" % (grown, expected)
        time.sleep(0.2)


def measure(bench, label, figure):
    api = bench.api
    api.ensure_namespace(NAMESPACE)
    created = time.monotonic()
    for i in range(OBJECTS):
        _put(api, "c%05d" % i, 0)
    print("# shard-cache: %d objects created in %.0f s" % (OBJECTS, time.monotonic() - created))
    status, body = api.request("GET", "/apis/e2e.ctrlhost.dev/v1/chaos")
    assert status == 200, body
    total = len(body["items"])  # the hosts own every namespace's Chaos objects
    uids = {item["metadata"]["name"]: item["metadata"]["uid"] for item in body["items"]
            if item["metadata"]["namespace"] == NAMESPACE}
    directory = tempfile.mkdtemp(prefix="shard-cache-", dir=os.environ["TEST_TMPDIR"])
    hosts, names, out = [], [], []
    one = {}
    try:
        for count in (1, 2, 3, 4):
            name = "cache-%d" % count
            previous = [_State(h) for h in hosts]
            hosts.append(host_fixture.Host.start(
                OPERATOR.format(chaos=bench.chaos, dir=directory, host=name),
                kubeconfig=bench.kubeconfig,
                extra_args=["--kube-api-qps", "0", "--shard-ring", NAMESPACE,
                            "--leader-elect-resource-namespace", NAMESPACE,
                            "--leader-elect-identity", name]))
            names.append(name)
            states = _settle(hosts, names, total)
            if count == 1:
                _wait_labelled(api, hosts[0])
                states = _settle(hosts, names, total)
            if count == 4:
                out += _moved(label, figure, previous, names[:3], states, names, uids)
                break
            memory = max(s.memory for s in states)
            events, updates = _events_round(api, hosts, states, count, uids)
            mode = states[0].mode
            if count == 1:
                one = {"memory": memory, "events": events}
                out.append(figure("%s: sharded cache, 1 host, Chaos cache bytes (%d objects)" %
                                  (label, OBJECTS), memory / 2**20, unit="MiB"))
                out.append(figure("%s: sharded cache, 1 host, watch events received for %d "
                                  "updates" % (label, updates), events, unit="n"))
                continue
            target = count == 3
            out.append(figure(
                "%s: sharded cache, %d hosts (%s), largest host's cache bytes" %
                (label, count, mode), memory / 2**20, unit="MiB", baseline=one["memory"] / 2**20,
                target="<= 0.40x of 1 host" if target else None,
                met=(memory <= 0.4 * one["memory"]) if target else None))
            out.append(figure(
                "%s: sharded cache, %d hosts (%s), largest host's watch events" %
                (label, count, mode), events, unit="n", baseline=one["events"],
                target="<= 0.40x of 1 host" if target else None,
                met=(events <= 0.4 * one["events"]) if target else None))
    finally:
        for h in hosts:
            h.kill()
    return out


def _moved(label, figure, before, before_names, after, after_names, uids):
    moved = doubled = 0
    for uid in uids.values():
        h = fnv1a64(uid)
        was = _owner(before, before_names, h)
        now = _owner(after, after_names, h)
        doubled += len(now) > 1
        moved += was != now
    share = moved / len(uids)
    return [
        figure("%s: sharded cache, a 4th host joins: objects whose owner changed" % label,
               share, unit="x", target="0.225-0.275 (1/4 +/- 10 %)",
               met=0.225 <= share <= 0.275),
        figure("%s: sharded cache, 4 hosts: objects in two hosts' ranges" % label, doubled,
               unit="n", target="0", met=doubled == 0),
    ]
