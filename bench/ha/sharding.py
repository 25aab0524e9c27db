"""The sharding part of `tools/bench ha`: one sharded controller (`sharding: {enabled: true}`,
`ctrlhost run --shard-ring`) on 1, 2 and 3 hosts, on the same workload in the same run.

Workload: OBJECTS Chaos objects exist before the hosts start; the hosts (the chaos e2e plugin,
maxConcurrentReconciles 4) are started at once, join the ring and reconcile every object once.
Figures, per host count:
- keys per host: the largest share over the even share (1.00 = perfectly even), from each
  host's shardKeysOwned in /debug/dump once the ring settled (every Chaos object the hosts
  cache: this run's and the earlier runs');
- reconciles/s from a cold start: distinct objects reconciled over the time from the first
  reconcile of any host to the moment every object was reconciled (the chaos record log, polled
  every 10 ms), as a ratio to 1 host. This includes the hand-offs while the hosts join one after
  the other (each join is a view change);
- reconciles/s in steady state (the figure the issue's 10 % overhead target is about): once the
  ring settled and the record log is quiet, one deletecollection removes every object's child
  ConfigMap (one request: the client is not what is measured) and the figure is OBJECTS over
  the time from that request to the last object reconciled again (its child applied anew), as
  a ratio to 1 host.
The hosts run with `--kube-api-qps 0`: with the default client-side limit (50 QPS against a
cluster) each host would be capped at ~25 reconciles/s, and the figure would be that cap.
On 2 shared cores the hosts compete for the same CPUs (and the API server with them): the
ratios show sharding's overhead, not a speed-up.
"""

import os
import tempfile
import threading
import time

import yaml

from e2e.host import host_fixture

OBJECTS = 600

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
  controllers:
    - name: chaos
      maxConcurrentReconciles: 4
      sharding: {{enabled: true}}
"""


def _put(api, namespace, name):
    body = {"apiVersion": "e2e.ctrlhost.dev/v1", "kind": "Chaos",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"mode": "ok", "data": {"value": "1"}}}
    status, _ = api.request("PATCH", "/apis/e2e.ctrlhost.dev/v1/namespaces/%s/chaos/%s"
                            "?fieldManager=bench&force=true" % (namespace, name), body,
                            "application/apply-patch+yaml")
    assert status in (200, 201), status


def _reconciled(directory, namespace, skip=0):
    """Distinct keys of `namespace` with an "end" record (after its first `skip` records)."""
    return {key for key, what, _ in host_fixture.chaos_records(directory, namespace)[skip:]
            if what == "end"}


def _owned(host):
    status, text = host.endpoint("/debug/dump")
    if status != 200:
        return None, None
    dump = yaml.safe_load(text)
    owned = None
    for plugin in dump.get("plugins", []):
        for controller in plugin.get("controllers") or []:
            if controller.get("name") == "chaos":
                owned = controller.get("shardKeysOwned")
    ring = dump.get("shardRing", {})
    settled = ring.get("members") == ring.get("adoptedView")
    return owned, (len(ring.get("members") or []), settled)


def _quiet(directory, namespace, quiet_for=1.0, limit=60.0):
    """How many records `namespace` has once the log has not grown for `quiet_for` seconds."""
    deadline = time.monotonic() + limit
    count, since = len(host_fixture.chaos_records(directory, namespace)), time.monotonic()
    while time.monotonic() - since < quiet_for:
        assert time.monotonic() < deadline, "the hosts never went quiet"
        time.sleep(0.1)
        now = len(host_fixture.chaos_records(directory, namespace))
        if now != count:
            count, since = now, time.monotonic()
    return count


def _steady_round(api, namespace, directory):
    """Reconciles/s when every object's child goes at once (one deletecollection of the
    ConfigMaps the objects own: one request, so the client is not what is measured), the ring
    settled and the hosts quiet. Each owner reconciles its object and applies the child again."""
    skip = _quiet(directory, namespace)
    start = time.monotonic()
    status, body = api.request("DELETE", "/api/v1/namespaces/%s/configmaps?labelSelector=chaos"
                               "%%3Dchild" % namespace)
    assert status == 200, (status, body)
    deadline = start + 300
    while len(_reconciled(directory, namespace, skip)) < OBJECTS:
        assert time.monotonic() < deadline, "not every object was reconciled after its change"
        time.sleep(0.01)
    return OBJECTS / (time.monotonic() - start)


def run(bench, count):
    """(cold-start reconciles/s, steady-state reconciles/s, largest share / even share) with
    `count` hosts."""
    namespace = "ha-shard-%d" % count
    api = bench.api
    api.ensure_namespace(namespace)
    for i in range(OBJECTS):
        _put(api, namespace, "s%04d" % i)
    directory = tempfile.mkdtemp(prefix=namespace + "-", dir=os.environ["TEST_TMPDIR"])
    hosts = [None] * count
    errors = []

    def start(i):
        try:
            hosts[i] = host_fixture.Host.start(
                OPERATOR.format(chaos=bench.chaos, dir=directory, host="shard-%d" % i),
                kubeconfig=bench.kubeconfig,
                # No client-side QPS limit: with the default 50 QPS (against a cluster) the
                # figure would be the limit's (2 writes per reconcile: ~25/s per host).
                extra_args=["--kube-api-qps", "0", "--shard-ring", namespace,
                            "--leader-elect-resource-namespace", namespace,
                            "--leader-elect-identity", "shard-%d" % i])
        except AssertionError as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=start, args=(i,)) for i in range(count)]
    try:
        for t in threads:
            t.start()
        first = None
        deadline = time.monotonic() + 300
        while True:
            assert time.monotonic() < deadline, "not every object was reconciled"
            done = _reconciled(directory, namespace)
            if done and first is None:
                first = time.monotonic()
            if len(done) >= OBJECTS:
                took = time.monotonic() - first
                break
            time.sleep(0.01)
        for t in threads:
            t.join(120)
        assert not errors, errors
        # The hosts cache (and own) the Chaos objects of every namespace, earlier runs' too.
        status, body = api.request("GET", "/apis/e2e.ctrlhost.dev/v1/chaos")
        assert status == 200, body
        total = len(body.get("items", []))
        share = 0
        deadline = time.monotonic() + 60
        while True:
            states = [_owned(h) for h in hosts]
            owned = [s[0] for s in states]
            if all(s[1] == (count, True) for s in states) and None not in owned and \
                    sum(owned) == total:
                share = max(owned) / (total / count)
                break
            assert time.monotonic() < deadline, "the ring never settled: %s" % states
            time.sleep(0.1)
        steady = _steady_round(api, namespace, directory)
        return OBJECTS / took, steady, share
    finally:
        for t in threads:
            t.join(120)
        for h in hosts:
            if h is not None:
                h.kill()


def measure(bench, label, figure):
    """The sharding figures (bench/report.h format through `figure`)."""
    out = []
    baseline = steady_baseline = None
    for count in (1, 2, 3):
        rate, steady, share = run(bench, count)
        if baseline is None:
            baseline, steady_baseline = rate, steady
        out.append(figure("%s: sharding, %d host(s), reconciles/s from a cold start (joins "
                          "included)" % (label, count),
                          rate, unit="1/s", baseline=baseline if count > 1 else None))
        if count > 1:
            out.append(figure("%s: sharding, %d hosts, reconciles/s in steady state (every "
                              "child deleted at once)" % (label, count), steady, unit="1/s",
                              baseline=steady_baseline, target=">= 0.90x of 1 host",
                              met=steady >= 0.9 * steady_baseline))
        else:
            out.append(figure("%s: sharding, 1 host, reconciles/s in steady state (every "
                              "child deleted at once)" % label, steady, unit="1/s"))
        if count > 1:
            out.append(figure("%s: sharding, %d hosts, largest keys share / even share" %
                              (label, count), share, unit="x", target="<= 1.15",
                              met=share <= 1.15))
    return out
