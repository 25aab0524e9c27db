"""End to end: per-operator Leases (spec.leaderElection: {perOperator: true}), two hosts of the
same two operators against a standalone embedded API server (`ctrlhost apiserver`) and against
real Kubernetes 1.20 (operator_lease_kube_e2e_test).

Operators alpha and beta each run the chaos plugin (controller chaos-alpha in namespace
ol-alpha, chaos-beta in ol-beta), each on its own Lease (ctrlhost-alpha, ctrlhost-beta), with
short timings (leaseDuration 4 s, renewDeadline 3 s, retryPeriod 1 s). The test creates the
Lease of beta held by host-b beforehand (as if host-b held it before a restart with a fixed
--leader-elect-identity), so the spread is known: host-a starts and leads alpha, stands by for
beta; host-b starts, leads beta at once (the Lease is its own) and stands by for alpha. Under a
stream of updates to both operators' objects host-a gets SIGTERM: it fences and releases
alpha's Lease, host-b takes it within one retry period (+ jitter + 1 s) and every object
converges. kill -9 of host-a instead (a third test) leaves alpha's Lease unreleased: its plugins
die with it, host-b takes alpha only once the Lease expired on its clock, within leaseDuration +
two retry periods of the kill, and every object converges. The chaos plugin logs "<key> <attempt> start|end <host> <pid>" for each reconcile,
appended (O_APPEND) by every plugin to one file: per operator, once a host started anything of
it no other host starts anything of it any more, and beta's keys were only ever reconciled by
host-b: each operator had exactly one leader at a time and no key was reconciled by two hosts.

A second test cuts host-a (leading alpha) off from the API server through a TCP proxy the test
blackholes: host-a fences alpha at renewDeadline, before alpha's Lease can expire, logs
"leadership lost" and exits 1 naming the operator, even though the partition heals right after
that instant; host-b takes alpha once the Lease expired on its clock, beta stays on host-b, and
host-a reconciles nothing after its fence closed.

A fourth test balances four operators (op1..op4): host-a starts alone and takes every Lease
(its fair share, ceil(4 / 1)); host-b joins the membership ring and host-a hands its extra ones
over gracefully, one at a time, highest name first (op4, then op3): it stops dispatching the
operator (which stays a warm standby on host-a) and releases the Lease, host-b's watch sees the
release and takes it. Within a bounded time each host holds 2; no Lease went from host-a to
anyone but host-b, host-a's dump never showed an operator led while host-b held its Lease, no
operator was reconciled by host-a after host-b started it, and no key twice at once. The gap
from host-a's release to host-b's acquireTime is printed (not asserted). Then host-b gets
SIGTERM: it leaves the ring and releases its Leases, and host-a takes all four again.
"""

import os
import re
import tempfile
import threading
import time

import yaml

from e2e.host import host_fixture
from e2e.kube import tcp_proxy
from tools.internal import bazel_unittest

OBJECTS = 30 if host_fixture.real_kube() else 100  # per operator
LEASE_DURATION = 4
RENEW_DEADLINE = 3
RETRY_PERIOD = 1
JITTER = 1.2

OPERATOR = """\
apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata:
  name: {name}
spec:
  plugins:
    - name: chaos
      exec:
        command: {chaos}
        env:
          CHAOS_DIR: {dir}
          CHAOS_VERSION: {host}
          CHAOS_CONTROLLER: chaos-{name}
  controllers:
    - name: chaos-{name}
      maxConcurrentReconciles: 4
      namespaces: [{namespace}]
  leaderElection:
    perOperator: true
    leaseNamespace: {leases}
    leaseDuration: {lease_duration}s
    renewDeadline: {renew_deadline}s
    retryPeriod: {retry_period}s
"""

LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)Z")


def parse_time(text):
    """Seconds since the epoch of an RFC 3339 UTC time with optional fraction."""
    whole, _, fraction = text.rstrip("Z").partition(".")
    seconds = time.mktime(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) - time.timezone
    return seconds + (float("0." + fraction) if fraction else 0.0)


def alive(pid):
    """Whether `pid` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        with open("/proc/%d/stat" % pid, encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class OperatorLeaseTest(host_fixture.ChaosServerTest):

    def setUp(self):
        # Each test its own namespaces (objects and Leases), so that the tests do not meet.
        tag = "ol%d" % (sum(map(ord, self.id())) % 10000)
        self.leases = tag + "-leases"
        self.namespaces = {"alpha": tag + "-alpha", "beta": tag + "-beta"}
        self.dir = tempfile.mkdtemp(prefix="oplease-", dir=os.environ.get("TEST_TMPDIR"))
        for namespace in [self.leases, *self.namespaces.values()]:
            self.api.ensure_namespace(namespace)
        self.hosts = []
        self.proxy = None

    def tearDown(self):
        for host in self.hosts:
            host.kill()
        if self.proxy is not None:
            self.proxy.close()

    def proxied_kubeconfig(self):
        """A kubeconfig of the same server through a TCP proxy the test controls (not in
        self.dir, where the plugins write: the host hides kubeconfigs from its plugins, and
        the directories on the way to a hidden file take no new entries from them)."""
        with open(self.kubeconfig, encoding="utf-8") as f:
            config = yaml.safe_load(f)
        server = config["clusters"][0]["cluster"]["server"]
        port = int(server.rsplit(":", 1)[1].rstrip("/"))
        self.proxy = tcp_proxy.TcpProxy(port)
        config["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:%d" % self.proxy.port
        kube_dir = tempfile.mkdtemp(prefix="oplease-kubeconfig-",
                                    dir=os.environ.get("TEST_TMPDIR"))
        path = os.path.join(kube_dir, "proxied.kubeconfig")
        with open(path, "w", encoding="utf-8") as f:
            yaml.safe_dump(config, f)
        os.chmod(path, 0o600)
        return path

    # --- helpers ----------------------------------------------------------------------------

    def operators(self, host):
        return "---\n".join(
            OPERATOR.format(name=name, chaos=self.chaos, dir=self.dir, host=host,
                            namespace=namespace, leases=self.leases, lease_duration=LEASE_DURATION,
                            renew_deadline=RENEW_DEADLINE, retry_period=RETRY_PERIOD)
            for name, namespace in sorted(self.namespaces.items()))

    def start(self, name, kubeconfig=None):
        host = host_fixture.Host.start(self.operators(name),
                                       kubeconfig=kubeconfig or self.kubeconfig,
                                       extra_args=["--leader-elect-identity", name])
        self.hosts.append(host)
        return host

    def lease_spec(self, operator):
        status, body = self.api.request(
            "GET", "/apis/coordination.k8s.io/v1/namespaces/%s/leases/ctrlhost-%s" %
            (self.leases, operator))
        return body.get("spec", {}) if status == 200 else {}

    def holder(self, operator):
        return self.lease_spec(operator).get("holderIdentity")

    def master_status(self, host, operator):
        wanted = 'leader_election_master_status{name="ctrlhost-%s"} ' % operator
        for line in host.metrics().splitlines():
            if line.startswith(wanted):
                return float(line.split()[-1])
        return None

    def put_chaos(self, namespace, name, value):
        body = {"apiVersion": "e2e.ctrlhost.dev/v1", "kind": "Chaos",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"mode": "ok", "data": {"value": str(value)}}}
        status, _ = self.api.request(
            "PATCH", "/apis/e2e.ctrlhost.dev/v1/namespaces/%s/chaos/%s"
            "?fieldManager=e2e&force=true" % (namespace, name), body,
            "application/apply-patch+yaml")
        return status

    def child_values(self, namespace):
        status, body = self.api.request("GET", "/api/v1/namespaces/%s/configmaps" % namespace)
        if status != 200:
            return {}
        return {item["metadata"]["name"]: item.get("data", {}).get("value")
                for item in body.get("items", [])}

    def log_lines(self):
        path = os.path.join(self.dir, "log")
        if not os.path.exists(path):
            return []
        with open(path, encoding="utf-8") as f:
            return [line for line in f.read().splitlines() if len(line.split(" ")) >= 5]

    def records(self):
        """The chaos log: [(key, what, host)] of both operators' namespaces."""
        return host_fixture.chaos_records(self.dir)

    def hold_lease_for(self, operator, identity):
        """Creates the operator's Lease held by `identity` (long enough not to expire here)."""
        now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
        status, body = self.api.request(
            "POST", "/apis/coordination.k8s.io/v1/namespaces/%s/leases" % self.leases,
            {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "ctrlhost-" + operator, "namespace": self.leases},
             "spec": {"holderIdentity": identity, "leaseDurationSeconds": 60,
                      "acquireTime": now, "renewTime": now, "leaseTransitions": 0}})
        self.assertEqual(status, 201, body)

    def operator_of(self, key):
        for name, namespace in self.namespaces.items():
            if key.startswith(namespace + "/"):
                return name
        return None

    def start_spread(self, names, a_kubeconfig=None):
        """host-a leads alpha, host-b leads beta, each stands by for the other; every object
        reconciled once, by its operator's leader."""
        for namespace in self.namespaces.values():
            for name in names:
                self.assertIn(self.put_chaos(namespace, name, 0), (200, 201))
        self.hold_lease_for("beta", "host-b")
        a = self.start("host-a", kubeconfig=a_kubeconfig)
        self.wait(lambda: self.holder("alpha") == "host-a", "host-a holds alpha's Lease")
        self.wait(lambda: self.master_status(a, "alpha") == 1, "host-a reports alpha led")
        self.assertEqual(self.holder("beta"), "host-b")
        self.assertEqual(self.master_status(a, "beta"), 0)
        b = self.start("host-b")
        self.wait(lambda: self.master_status(b, "beta") == 1, "host-b leads beta")
        self.assertEqual(self.master_status(b, "alpha"), 0)
        self.assertEqual(self.master_status(a, "alpha"), 1)
        self.assertEqual(self.master_status(a, "beta"), 0)
        self.assertEqual(self.holder("alpha"), "host-a")
        self.assertEqual(self.holder("beta"), "host-b")
        for namespace in self.namespaces.values():
            self.wait(lambda: sorted(self.child_values(namespace).items()) ==
                      [(n, "0") for n in names], "%s reconciled once" % namespace)
        for key, _, host in self.records():
            self.assertEqual(host, "host-a" if self.operator_of(key) == "alpha" else "host-b",
                             "a standby reconciled %s" % key)
        return a, b

    def run_updates(self, names):
        """A stream of updates to a third of each operator's objects: (stop, thread, last,
        errors)."""
        stop = threading.Event()
        last = {(ns, n): 0 for ns in self.namespaces.values() for n in names}
        errors = []

        def updater():
            value = 0
            while not stop.is_set():
                value += 1
                for namespace in self.namespaces.values():
                    for name in names[::3]:
                        if stop.is_set():
                            return
                        status = self.put_chaos(namespace, name, value)
                        if status not in (200, 201):
                            errors.append((namespace, name, status))
                        last[(namespace, name)] = value
                time.sleep(0.05)

        thread = threading.Thread(target=updater)
        thread.start()
        return stop, thread, last, errors

    def check_converged_and_exclusive(self, names, last, killed_at=None):
        """Every object converged; per operator one leader at a time in the record log (alpha
        moved from host-a to host-b once, beta only on host-b); no key started twice at once.
        `killed_at`: the number of records when host-a and its plugins were dead (kill -9), so
        that its reconciles cut short there (a start with no end) count as ended there.
        Returns the records."""
        for namespace in self.namespaces.values():
            def unconverged(namespace=namespace):
                values = self.child_values(namespace)
                return [n for n in names if values.get(n) != str(last[(namespace, n)])]
            self.wait(lambda: not unconverged(), "%s converged" % namespace)
        records = self.records()
        alpha = [r for r in records if self.operator_of(r[0]) == "alpha"]
        first_b = next((i for i, r in enumerate(alpha) if r[2] == "host-b"), None)
        self.assertIsNotNone(first_b, "host-b never reconciled alpha")
        self.assertGreater(first_b, 0)
        self.assertEqual([r for r in alpha[first_b:] if r[2] == "host-a"], [],
                         "host-a reconciled alpha after host-b started it")
        self.assertEqual({r[2] for r in records if self.operator_of(r[0]) == "beta"},
                         {"host-b"})
        running = {}
        for index, (key, what, host) in enumerate(records):
            if index == killed_at:
                running = {k: h for k, h in running.items() if h != "host-a"}
            if what == "start":
                self.assertFalse(running.get(key), "%s reconciled twice at once" % key)
                running[key] = host
            elif running.get(key) == host:
                running[key] = None
        return records

    # --- the scenarios ----------------------------------------------------------------------

    def test_two_hosts_spread_two_operators_and_take_over_at_sigterm(self):
        names = ["o%03d" % i for i in range(OBJECTS)]
        a, b = self.start_spread(names)
        # Where users look: /readyz names each operator's state, the dump each Lease's.
        status, ready = b.endpoint("/readyz?verbose")
        self.assertEqual(status, 200, ready)
        self.assertIn("[+]leader ok: operator alpha: standby (Lease %s/ctrlhost-alpha, leader "
                      "host-a); operator beta: leading (Lease %s/ctrlhost-beta)" %
                      (self.leases, self.leases), ready)
        _, dump = a.endpoint("/debug/dump")
        leases = {entry["operator"]: entry
                  for entry in yaml.safe_load(dump)["operatorLeases"]}
        self.assertEqual(leases["alpha"]["lease"], self.leases + "/ctrlhost-alpha")
        self.assertEqual(leases["alpha"]["identity"], "host-a")
        self.assertEqual(leases["alpha"]["state"], "leader")
        self.assertEqual(leases["alpha"]["dispatching"], True)
        self.assertEqual(leases["alpha"]["writesAllowed"], True)
        self.assertEqual(leases["beta"]["state"], "standby")
        self.assertEqual(leases["beta"]["holder"], "host-b")
        self.assertEqual(leases["beta"]["dispatching"], False)
        self.assertEqual(leases["beta"]["writesAllowed"], False)

        before = len(self.records())
        stop, thread, last, errors = self.run_updates(names)
        try:
            self.wait(lambda: any(r[2] == "host-a" and r[1] == "start"
                                  for r in self.records()[before:]),
                      "host-a reconciling alpha's updates")
            transitions = self.lease_spec("alpha").get("leaseTransitions", 0)
            a.process.send_signal(15)
            signalled = time.monotonic()
            self.wait(lambda: self.holder("alpha") == "host-b", "host-b holds alpha's Lease",
                      timeout=RETRY_PERIOD * JITTER + 1)
            print("SIGTERM: host-b leads alpha %.2fs after the signal" %
                  (time.monotonic() - signalled))
            self.assertEqual(a.process.wait(30), 0, a.log()[-4000:])
            self.assertIn("leader election: Lease released", a.log())
            self.assertEqual(self.lease_spec("alpha").get("leaseTransitions"), transitions + 1)
            time.sleep(1)
        finally:
            stop.set()
            thread.join(60)
        self.assertEqual(errors, [])
        self.check_converged_and_exclusive(names, last)
        self.assertEqual(self.master_status(b, "alpha"), 1)
        self.assertEqual(self.master_status(b, "beta"), 1)
        self.assertEqual(b.stop(), 0, b.log()[-4000:])

    def test_kill_9_the_other_host_takes_over_once_the_lease_expired(self):
        names = ["k%03d" % i for i in range(OBJECTS)]
        a, b = self.start_spread(names)
        before = len(self.records())
        stop, thread, last, errors = self.run_updates(names)
        try:
            self.wait(lambda: any(r[2] == "host-a" and r[1] == "start"
                                  for r in self.records()[before:]),
                      "host-a reconciling alpha's updates")
            transitions = self.lease_spec("alpha").get("leaseTransitions", 0)
            a.process.kill()
            killed = time.monotonic()
            self.assertEqual(a.process.wait(30), -9)
            # Its plugins die with it (parent-death signal): none keeps reconciling alpha.
            plugin_pids = {int(line.split(" ")[4]) for line in self.log_lines()
                           if line.split(" ")[3:4] == ["host-a"]}
            self.assertTrue(plugin_pids)
            self.wait(lambda: not any(alive(pid) for pid in plugin_pids),
                      "host-a's plugins %s gone" % sorted(plugin_pids), timeout=10)
            killed_at = len(self.records())
            renewed = parse_time(self.lease_spec("alpha")["renewTime"])
            # Nobody released the Lease: host-b waits until it expired on its own clock (it
            # may have seen host-a's last renewal up to one retry period after the kill), then
            # takes it at its next try.
            self.wait(lambda: self.holder("alpha") == "host-b", "host-b holds alpha's Lease",
                      timeout=LEASE_DURATION + 2 * RETRY_PERIOD * JITTER + 0.5)
            print("kill -9: host-b leads alpha %.2fs after the kill" %
                  (time.monotonic() - killed))
            spec = self.lease_spec("alpha")
            self.assertEqual(spec.get("leaseTransitions"), transitions + 1)
            self.assertGreaterEqual(parse_time(spec["acquireTime"]), renewed + LEASE_DURATION,
                                    "host-b took alpha before host-a's Lease expired")
            self.assertNotIn("leader election: Lease released", a.log())
            time.sleep(1)
        finally:
            stop.set()
            thread.join(60)
        self.assertEqual(errors, [])
        records = self.check_converged_and_exclusive(names, last, killed_at=killed_at)
        self.assertEqual([r for r in records[killed_at:] if r[2] == "host-a"], [])
        self.assertEqual(self.master_status(b, "alpha"), 1)
        self.assertEqual(self.master_status(b, "beta"), 1)
        self.assertEqual(b.stop(), 0, b.log()[-4000:])

    def test_partitioned_host_fences_its_operator_before_the_lease_expires(self):
        names = ["p%03d" % i for i in range(OBJECTS)]
        a, b = self.start_spread(names, a_kubeconfig=self.proxied_kubeconfig())
        before = len(self.records())
        stop, thread, last, errors = self.run_updates(names)
        try:
            self.wait(lambda: any(r[2] == "host-a" and r[1] == "start"
                                  for r in self.records()[before:]),
                      "host-a reconciling alpha's updates")
            renewed = parse_time(self.lease_spec("alpha")["renewTime"])
            self.proxy.blackhole()
            # host-a cannot renew alpha's Lease: it fences alpha at renewDeadline and notices
            # within one more Lease request (retryPeriod).
            lost = self.wait(lambda: [line for line in a.log().splitlines()
                                      if "leadership lost" in line],
                             "host-a loses alpha", timeout=RENEW_DEADLINE + 3 * RETRY_PERIOD + 5)
            fenced_at = parse_time(LOG_TIME.match(lost[0]).group(1))
            after_fence = len(self.records())
            # The partition heals at once: a host that had not fenced itself would write again.
            self.proxy.restore()
            self.assertEqual(a.process.wait(60), 1, a.log()[-4000:])
            self.wait(lambda: self.holder("alpha") == "host-b", "host-b holds alpha's Lease",
                      timeout=LEASE_DURATION + 2 * RETRY_PERIOD * JITTER + 5)
            acquired = parse_time(self.lease_spec("alpha")["acquireTime"])
            time.sleep(1)
        finally:
            stop.set()
            thread.join(60)
        self.assertEqual(errors, [])
        # host-a stopped alpha before its Lease could expire, so before host-b could take it.
        self.assertLess(fenced_at, renewed + LEASE_DURATION, lost[0])
        self.assertLess(fenced_at, acquired, lost[0])
        self.assertIn("lease=%s/ctrlhost-alpha" % self.leases, lost[0])
        records = self.check_converged_and_exclusive(names, last)
        self.assertEqual([r for r in records[after_fence:] if r[2] == "host-a"], [])
        self.assertIn("error: leadership lost: operator alpha (Lease %s/ctrlhost-alpha)" %
                      self.leases, a.log())
        self.assertEqual(self.master_status(b, "alpha"), 1)
        self.assertEqual(b.stop(), 0, b.log()[-4000:])

    # --- balancing --------------------------------------------------------------------------

    def log_times(self, host, message, key="lease"):
        """{value of `key`: time} of `host`'s log lines with `message` (the last one of each)."""
        times = {}
        for line in host.log().splitlines():
            match = LOG_TIME.match(line)
            value = re.search(key + r"=(\S+)", line)
            if message in line and match and value:
                times[value.group(1)] = parse_time(match.group(1))
        return times

    def test_a_joining_host_takes_its_fair_share_over_gracefully(self):
        ops = ["op1", "op2", "op3", "op4"]
        tag = self.leases[:-len("-leases")]
        self.namespaces = {op: "%s-%s" % (tag, op) for op in ops}
        for namespace in self.namespaces.values():
            self.api.ensure_namespace(namespace)
        names = ["b%03d" % i for i in range(OBJECTS // 5)]
        for namespace in self.namespaces.values():
            for name in names:
                self.assertIn(self.put_chaos(namespace, name, 0), (200, 201))
        a = self.start("host-a")
        self.wait(lambda: all(self.holder(op) == "host-a" for op in ops),
                  "host-a holds every Lease (alone, its fair share is all four)")
        for namespace in self.namespaces.values():
            self.wait(lambda namespace=namespace: sorted(self.child_values(namespace).items()) ==
                      [(n, "0") for n in names], "%s reconciled once" % namespace)

        # While host-b joins: per Lease, the holders seen in order, and whether host-a's dump
        # (read after the Lease) showed the operator led while host-b held its Lease.
        seen = {op: [] for op in ops}
        overlaps = []
        done = threading.Event()

        def watch_hand_overs():
            while not done.is_set():
                holders = {op: self.holder(op) for op in ops}
                status, dump = a.endpoint("/debug/dump")
                if status != 200:
                    continue
                leases = {e["operator"]: e for e in yaml.safe_load(dump)["operatorLeases"]}
                for op in ops:
                    if not seen[op] or seen[op][-1] != holders[op]:
                        seen[op].append(holders[op])
                    entry = leases[op]
                    if holders[op] == "host-b" and (entry["state"] == "leader" or
                                                    entry["dispatching"] or
                                                    entry["writesAllowed"]):
                        overlaps.append((op, entry))
                time.sleep(0.02)

        watcher = threading.Thread(target=watch_hand_overs)
        watcher.start()
        before = len(self.records())
        stop, thread, last, errors = self.run_updates(names)
        try:
            self.wait(lambda: any(r[2] == "host-a" and r[1] == "start"
                                  for r in self.records()[before:]),
                      "host-a reconciling the updates")
            b = self.start("host-b")
            joined = time.monotonic()
            self.wait(lambda: [self.holder(op) for op in ops] ==
                      ["host-a", "host-a", "host-b", "host-b"],
                      "host-a hands op4 and op3 over to host-b", timeout=60)
            print("join: host-b holds op3 and op4 %.2fs after it started (ready)" %
                  (time.monotonic() - joined))
            time.sleep(1)  # a little more of the update stream on both hosts
        finally:
            done.set()
            watcher.join(30)
        self.assertEqual(overlaps, [], "host-a led an operator whose Lease host-b held")
        for op in ["op1", "op2"]:
            self.assertEqual(seen[op], ["host-a"], op)
        for op in ["op3", "op4"]:
            self.assertIn(seen[op], (["host-a", "", "host-b"], ["host-a", "host-b"]), op)

        # The figures: from host-a's release (its log line follows the write) and from the
        # moment it stopped dispatching (the hand-over began) to host-b's acquireTime.
        began = self.log_times(a, "leader election: handing the Lease over")
        drained = self.log_times(a, "dispatch stopped: the operator stands by", key="operator")
        released = self.log_times(a, "leader election: Lease handed over (released)")
        for op in ["op4", "op3"]:
            lease = "%s/ctrlhost-%s" % (self.leases, op)
            acquired = parse_time(self.lease_spec(op)["acquireTime"])
            self.assertIn(lease, released, a.log()[-4000:])
            print("hand-over of %s: host-a stopped dispatching it, drained in %.3fs; host-b "
                  "acquired it %.3fs after host-a's release was logged, %.3fs after host-a began "
                  "the hand-over" % (op, drained[op] - began[lease], acquired - released[lease],
                                     acquired - began[lease]))
        log = a.log()
        for op in ["op4", "op3"]:
            self.assertRegex(log, r"handing an operator over to balance the hosts.*operator=%s"
                             r".*fair_share=2.*hosts=2" % op)
        _, dump = a.endpoint("/debug/dump")
        dump = yaml.safe_load(dump)
        balance = dump["operatorLeaseBalance"]
        self.assertEqual((balance["hosts"], balance["fairShare"], balance["handOvers"]), (2, 2, 2))
        self.assertEqual(balance["leading"], ["op1", "op2"])
        leases = {e["operator"]: e for e in dump["operatorLeases"]}
        for op in ["op3", "op4"]:
            self.assertEqual((leases[op]["state"], leases[op]["holder"],
                              leases[op]["dispatching"], leases[op]["writesAllowed"]),
                             ("standby", "host-b", False, False))
        self.assertEqual(self.master_status(a, "op4"), 0)
        self.assertEqual(self.master_status(b, "op4"), 1)

        # host-b stops: it leaves the ring, then releases; host-a takes all four again.
        try:
            b.process.send_signal(15)
            signalled = time.monotonic()
            self.wait(lambda: all(self.holder(op) == "host-a" for op in ops),
                      "host-a holds every Lease again", timeout=30)
            print("leave: host-a holds all four %.2fs after host-b's SIGTERM" %
                  (time.monotonic() - signalled))
            self.assertEqual(b.process.wait(30), 0, b.log()[-4000:])
            time.sleep(1)
        finally:
            stop.set()
            thread.join(60)
        self.assertEqual(errors, [])
        for namespace in self.namespaces.values():
            def unconverged(namespace=namespace):
                values = self.child_values(namespace)
                return [n for n in names if values.get(n) != str(last[(namespace, n)])]
            self.wait(lambda: not unconverged(), "%s converged" % namespace)
        # Per operator: once host-b started it, host-a started nothing of it until host-b was
        # gone; and no key was reconciled by two hosts at once.
        records = self.records()
        for op in ["op3", "op4"]:
            mine = [r for r in records if self.operator_of(r[0]) == op and r[1] == "start"]
            first_b = next((i for i, r in enumerate(mine) if r[2] == "host-b"), None)
            self.assertIsNotNone(first_b, "host-b never reconciled %s" % op)
            last_b = max(i for i, r in enumerate(mine) if r[2] == "host-b")
            self.assertEqual([r for r in mine[first_b:last_b] if r[2] == "host-a"], [],
                             "host-a reconciled %s while host-b led it" % op)
        for op in ["op1", "op2"]:
            self.assertEqual({r[2] for r in records if self.operator_of(r[0]) == op}, {"host-a"})
        running = {}
        for key, what, host in records:
            if what == "start":
                self.assertFalse(running.get(key), "%s reconciled twice at once" % key)
                running[key] = host
            elif running.get(key) == host:
                running[key] = None
        balance = yaml.safe_load(a.endpoint("/debug/dump")[1])["operatorLeaseBalance"]
        self.assertEqual((balance["hosts"], balance["fairShare"]), (1, 4))
        self.assertEqual(a.stop(), 0, a.log()[-4000:])


if __name__ == "__main__":
    bazel_unittest.main()
