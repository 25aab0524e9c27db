"""End to end: several hosts of one operator with leader election (`ctrlhost run --leader-elect`),
against a standalone embedded API server (`ctrlhost apiserver`: the hosts must be able to die
without taking the server with them) and against real Kubernetes 1.20 (leader_kube_e2e_test).

Two hosts run the chaos plugin on one Lease, with client-go's timings (leaseDuration 15 s,
renewDeadline 10 s, retryPeriod 2 s), while a stream of updates goes to the Chaos objects:
- kill -9 of the leader: the standby leads once the Lease expired, every object converges;
- SIGTERM of the leader: it releases the Lease and the standby takes over at its next attempt;
- the leader partitioned from the API server (a TCP proxy the test blackholes): it fences itself
  at renewDeadline, before its Lease can expire, exits with an error, and the standby takes over.
A fourth test elects through the operator file's spec.leaderElection block instead of the flags
(a flag given on the command line wins over the block's field).
The chaos plugin logs "<key> <attempt> start|end <host> <pid>" for every reconcile (host = its
CHAOS_VERSION): a standby reconciles nothing, and once the new leader reconciled anything the
old one reconciles nothing more, so no key is ever reconciled by both.

The bounds the waits use are the guarantees of docs/operations.md (kill -9: leaseDuration plus
two retry periods with their jitter; SIGTERM: one retry period with its jitter plus 1 s); the
failover times themselves are measured by `tools/bench ha`.
"""

import os
import re
import subprocess
import tempfile
import threading
import time

import yaml

from e2e.host import host_fixture
from e2e.kube import tcp_proxy
from tools.internal import bazel_unittest

OBJECTS = 60 if host_fixture.real_kube() else 200
LEASE_DURATION = 15
RETRY_PERIOD = 2
RENEW_DEADLINE = 10
JITTER = 1.2  # a standby waits retryPeriod x [1, 1.2) between attempts

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
"""

# spec.leaderElection (docs/operator-spec.md): with it the hosts need no --leader-elect.
LEADER_ELECTION_BLOCK = """\
  leaderElection:
    leaseName: {lease}
    leaseNamespace: {namespace}
    leaseDuration: 15s
    renewDeadline: 10s
    retryPeriod: 2s
"""

LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)Z")


def parse_time(text):
    """Seconds since the epoch of an RFC 3339 UTC time with optional fraction."""
    whole, _, fraction = text.rstrip("Z").partition(".")
    seconds = time.mktime(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) - time.timezone
    return seconds + (float("0." + fraction) if fraction else 0.0)


class LeaderElectionTest(host_fixture.ChaosServerTest):

    # --- helpers ----------------------------------------------------------------------------

    def setUp(self):
        self.lease = self.id().split(".")[-1].replace("_", "-")
        self.namespace = self.lease
        self.dir = tempfile.mkdtemp(prefix="leader-", dir=os.environ.get("TEST_TMPDIR"))
        self.api.ensure_namespace(self.namespace)
        self.hosts = []
        self.proxy = None

    def tearDown(self):
        for host in self.hosts:
            host.kill()
        if self.proxy is not None:
            self.proxy.close()

    def start(self, name, kubeconfig=None):
        host = host_fixture.Host.start(
            OPERATOR.format(chaos=self.chaos, dir=self.dir, host=name),
            kubeconfig=kubeconfig or self.kubeconfig,
            extra_args=["--leader-elect", "--leader-elect-resource-name", self.lease,
                        "--leader-elect-resource-namespace", self.namespace,
                        "--leader-elect-identity", name])
        self.hosts.append(host)
        return host

    def proxied_kubeconfig(self):
        """A kubeconfig of the same server through a TCP proxy the test controls."""
        with open(self.kubeconfig, encoding="utf-8") as f:
            config = yaml.safe_load(f)
        server = config["clusters"][0]["cluster"]["server"]
        port = int(server.rsplit(":", 1)[1].rstrip("/"))
        self.proxy = tcp_proxy.TcpProxy(port)
        config["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:%d" % self.proxy.port
        # Not in self.dir, where the plugins write their log: the host hides every kubeconfig
        # from its plugins (Landlock), and the directories on the way to a hidden file take no
        # new entries from them (runtime/plugin/sandbox.h).
        kube_dir = tempfile.mkdtemp(prefix="leader-kubeconfig-", dir=os.environ.get("TEST_TMPDIR"))
        path = os.path.join(kube_dir, "proxied.kubeconfig")
        with open(path, "w", encoding="utf-8") as f:
            yaml.safe_dump(config, f)
        os.chmod(path, 0o600)
        return path

    def master_status(self, host):
        """leader_election_master_status{name=<this test's Lease>} of `host`."""
        wanted = 'leader_election_master_status{name="%s"} ' % self.lease
        for line in host.metrics().splitlines():
            if line.startswith(wanted):
                return float(line.split()[-1])
        return None

    def lease_spec(self):
        status, body = self.api.request(
            "GET", "/apis/coordination.k8s.io/v1/namespaces/%s/leases/%s" %
            (self.namespace, self.lease))
        return body.get("spec", {}) if status == 200 else {}

    def holder(self):
        return self.lease_spec().get("holderIdentity")

    def put_chaos(self, name, value):
        body = {"apiVersion": "e2e.ctrlhost.dev/v1", "kind": "Chaos",
                "metadata": {"name": name, "namespace": self.namespace},
                "spec": {"mode": "ok", "data": {"value": str(value)}}}
        status, _ = self.api.request(
            "PATCH", "/apis/e2e.ctrlhost.dev/v1/namespaces/%s/chaos/%s"
            "?fieldManager=e2e&force=true" % (self.namespace, name), body,
            "application/apply-patch+yaml")
        return status

    def child_value(self, name):
        status, body = self.api.request(
            "GET", "/api/v1/namespaces/%s/configmaps/%s" % (self.namespace, name))
        return body.get("data", {}).get("value") if status == 200 else None

    def records(self):
        """The chaos log of this test's namespace: [(key, what, host)] in append order."""
        return host_fixture.chaos_records(self.dir, self.namespace)

    def start_pair(self, leader_kubeconfig=None):
        """host-a leads, host-b stands by (both ready)."""
        a = self.start("host-a", kubeconfig=leader_kubeconfig)
        self.wait(lambda: self.holder() == "host-a", "host-a holds the Lease")
        b = self.start("host-b")
        status, text = b.endpoint("/readyz?verbose")
        self.assertEqual(status, 200, text)  # a standby is ready: it serves
        self.assertIn("[+]leader ok: standby (Lease %s/%s, leader host-a)" %
                      (self.namespace, self.lease), text)
        status, text = a.endpoint("/readyz?verbose")
        self.assertIn("[+]leader ok: leading", text)
        self.assertEqual(self.master_status(a), 1)
        self.assertEqual(self.master_status(b), 0)
        _, dump = b.endpoint("/debug/dump")
        self.assertIn("state: standby", dump)
        self.assertIn("dispatching: false", dump)
        return a, b

    def run_updates(self, names):
        """Starts a stream of updates to `names`; returns (stop, last values, errors)."""
        stop = threading.Event()
        last = {}
        errors = []
        for name in names:
            self.assertIn(self.put_chaos(name, 0), (200, 201))
            last[name] = 0

        def updater():
            value = 0
            while not stop.is_set():
                value += 1
                for name in names:
                    if stop.is_set():
                        return
                    status = self.put_chaos(name, value)
                    if status not in (200, 201):
                        errors.append((name, status))
                    last[name] = value
                time.sleep(0.05)

        thread = threading.Thread(target=updater)
        thread.start()
        return stop, thread, last, errors

    def check_converged_and_exclusive(self, names, last, old="host-a", new="host-b",
                                      standby_until=None):
        for name in names:
            want = str(last[name])
            self.wait(lambda: self.child_value(name) == want, "%s converged to %s" % (name, want),
                      timeout=120)
        records = self.records()
        first_new = next((i for i, r in enumerate(records) if r[2] == new), None)
        self.assertIsNotNone(first_new, "the new leader reconciled nothing")
        if standby_until is not None:
            self.assertGreaterEqual(first_new, standby_until,
                                    "the standby reconciled while the leader led")
        late_old = [r for r in records[first_new:] if r[2] == old]
        self.assertEqual(late_old, [], "the old leader reconciled after the new one started")
        # Within one host no key runs twice at once (the runner's rule), across hosts the
        # ordering above: no key was reconciled by both.
        running = {}
        for key, what, host in records:
            if what == "start":
                self.assertFalse(running.get((key, host)), "%s reconciled twice at once" % key)
                running[(key, host)] = True
            else:
                running[(key, host)] = False
        return records

    # --- the scenarios ----------------------------------------------------------------------

    def test_kill_9_of_the_leader(self):
        a, b = self.start_pair()
        names = ["k%03d" % i for i in range(OBJECTS)]
        stop, thread, last, errors = self.run_updates(names)
        try:
            self.wait(lambda: len(self.records()) > OBJECTS, "host-a reconciling")
            before = len(self.records())
            self.assertTrue(all(r[2] == "host-a" for r in self.records()))
            transitions = self.lease_spec().get("leaseTransitions", 0)
            killed = time.monotonic()
            a.kill()
            bound = LEASE_DURATION + 2 * RETRY_PERIOD * JITTER + 1
            self.wait(lambda: self.holder() == "host-b", "host-b holds the Lease", timeout=bound)
            print("kill -9: host-b leads %.1fs after the kill" % (time.monotonic() - killed))
            self.assertEqual(self.lease_spec().get("leaseTransitions"), transitions + 1)
            time.sleep(2)
        finally:
            stop.set()
            thread.join(60)
        self.assertEqual(errors, [])
        self.check_converged_and_exclusive(names, last, standby_until=before)
        self.assertIn("[+]leader ok: leading", b.endpoint("/readyz?verbose")[1])
        self.assertEqual(self.master_status(b), 1)
        self.assertEqual(b.stop(), 0, b.log()[-4000:])

    def test_sigterm_hands_over_within_one_retry_period(self):
        a, b = self.start_pair()
        names = ["t%03d" % i for i in range(OBJECTS)]
        stop, thread, last, errors = self.run_updates(names)
        try:
            self.wait(lambda: len(self.records()) > OBJECTS, "host-a reconciling")
            before = len(self.records())
            a.process.send_signal(15)
            stopped = time.monotonic()
            bound = RETRY_PERIOD * JITTER + 1
            self.wait(lambda: self.holder() == "host-b", "host-b holds the Lease", timeout=bound)
            print("SIGTERM: host-b leads %.2fs after the signal" % (time.monotonic() - stopped))
            self.assertEqual(a.process.wait(30), 0, a.log()[-4000:])
            self.assertIn("Lease released", a.log())
            time.sleep(2)
        finally:
            stop.set()
            thread.join(60)
        self.assertEqual(errors, [])
        self.check_converged_and_exclusive(names, last, standby_until=before)
        self.assertEqual(b.stop(), 0, b.log()[-4000:])

    def test_client_go_0_32_and_the_host_share_a_lease(self):
        """client-go 0.32's leaderelection (e2e/clientgo/modern, scenario leasepeer) and the host
        campaign for one Lease: the peer sees the host lead and waits; the host's SIGTERM
        releases the Lease and the peer takes it; a host started meanwhile stands by until the
        peer releases it, then leads."""
        program = os.environ.get("CTRLHOST_CLIENTGO_MODERN") or os.path.expanduser(
            "~/.cache/ctrlhost/clientgo-0.32/bin/current")
        self.assertTrue(os.access(program, os.X_OK),
                        "the client-go 0.32 program is not built: run tools/clientgo-modern")
        a = self.start("host-a")
        self.wait(lambda: self.holder() == "host-a", "host-a holds the Lease")
        peer = subprocess.Popen(
            [program, "-kubeconfig", self.kubeconfig, "-namespace", self.namespace,
             "-scenario", "leasepeer", "-lease-name", self.lease, "-identity", "clientgo-peer",
             "-hold", "8s", "-timeout", "120s"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        lines = []
        reader = threading.Thread(target=lambda: lines.extend(peer.stdout), daemon=True)
        reader.start()
        try:
            self.wait(lambda: "LEADER host-a\n" in lines, "the peer sees host-a lead")
            time.sleep(RETRY_PERIOD * JITTER * 2)  # the peer tries and fails, twice
            self.assertNotIn("STARTED clientgo-peer\n", lines)
            transitions = self.lease_spec().get("leaseTransitions", 0)
            a.process.send_signal(15)
            self.assertEqual(a.process.wait(30), 0, a.log()[-4000:])
            self.wait(lambda: "STARTED clientgo-peer\n" in lines, "the peer takes the Lease")
            self.assertEqual(self.holder(), "clientgo-peer")
            self.assertGreater(self.lease_spec().get("leaseTransitions", 0), transitions)
            b = self.start("host-b")
            self.wait(lambda: self.master_status(b) == 0.0, "host-b standing by")
            self.assertEqual(self.holder(), "clientgo-peer")
            self.wait(lambda: self.holder() == "host-b", "host-b leads once the peer released")
            self.assertEqual(self.master_status(b), 1.0)
            self.assertEqual(peer.wait(60), 0, "".join(lines))
            reader.join(10)
            self.assertIn("RELEASED clientgo-peer\n", lines)
            self.assertIn("PASS leasepeer:", "".join(lines))
            self.assertEqual(b.stop(), 0, b.log()[-4000:])
        finally:
            if peer.poll() is None:
                peer.kill()
                peer.wait(10)

    def test_lease_from_the_operator_file(self):
        """spec.leaderElection alone elects (no --leader-elect); a flag given wins over it."""
        text = (OPERATOR.format(chaos=self.chaos, dir=self.dir, host="file") +
                LEADER_ELECTION_BLOCK.format(lease=self.lease, namespace=self.namespace))

        def start(name, *args):
            host = host_fixture.Host.start(
                text, kubeconfig=self.kubeconfig,
                extra_args=["--leader-elect-identity", name, *args])
            self.hosts.append(host)
            return host

        a = start("host-a")
        self.wait(lambda: self.holder() == "host-a", "host-a holds the Lease of the file")
        self.wait(lambda: self.master_status(a) == 1, "host-a reports itself leader")
        b = start("host-b")
        status, text_b = b.endpoint("/readyz?verbose")
        self.assertEqual(status, 200, text_b)
        self.assertIn("[+]leader ok: standby (Lease %s/%s, leader host-a)" %
                      (self.namespace, self.lease), text_b)
        self.assertEqual(self.master_status(b), 0)
        # --leader-elect-resource-name given on the command line wins over leaseName.
        other = self.lease + "-flag"
        c = start("host-c", "--leader-elect-resource-name", other)

        def other_holder():
            status, body = self.api.request(
                "GET", "/apis/coordination.k8s.io/v1/namespaces/%s/leases/%s" %
                (self.namespace, other))
            return body.get("spec", {}).get("holderIdentity") if status == 200 else None

        self.wait(lambda: other_holder() == "host-c", "host-c holds the Lease its flag names")
        self.assertEqual(self.holder(), "host-a")
        # The usual hand-over on SIGTERM.
        a.process.send_signal(15)
        self.wait(lambda: self.holder() == "host-b", "host-b holds the Lease",
                  timeout=RETRY_PERIOD * JITTER + 1)
        self.assertEqual(a.process.wait(30), 0, a.log()[-4000:])
        self.assertEqual(b.stop(), 0, b.log()[-4000:])
        self.assertEqual(c.stop(), 0, c.log()[-4000:])

    def test_partitioned_leader_fences_itself_before_its_lease_expires(self):
        a, b = self.start_pair(leader_kubeconfig=self.proxied_kubeconfig())
        names = ["p%03d" % i for i in range(OBJECTS)]
        stop, thread, last, errors = self.run_updates(names)
        try:
            self.wait(lambda: len(self.records()) > OBJECTS, "host-a reconciling")
            renewed = parse_time(self.lease_spec()["renewTime"])
            self.proxy.blackhole()
            # host-a cannot renew: it fences itself at renewDeadline and exits with an error.
            # The exit bound is generous: what is checked is when it fenced itself (the log
            # line's time, below); the stop after it (runners, plugins, watches cut off by the
            # partition) took up to ~30 s under a loaded CI machine.
            a.process.wait(RENEW_DEADLINE + 3 * RETRY_PERIOD + 60)
            self.assertEqual(a.process.returncode, 1, a.log()[-4000:])
            log = a.log()
            lost = [line for line in log.splitlines() if "leadership lost" in line]
            self.assertTrue(lost, log[-4000:])
            fenced_at = parse_time(LOG_TIME.match(lost[0]).group(1))
            after_fence = len(self.records())
            # The partition heals at once: a host that had not fenced itself would write again.
            self.proxy.restore()
            self.wait(lambda: self.holder() == "host-b", "host-b holds the Lease",
                      timeout=LEASE_DURATION + 2 * RETRY_PERIOD * JITTER + 5)
            acquired = parse_time(self.lease_spec()["acquireTime"])
            time.sleep(2)
        finally:
            stop.set()
            thread.join(60)
        self.assertEqual(errors, [])
        # The old leader stopped before its Lease could expire, and so before the new leader
        # could acquire it: never two writers.
        self.assertLess(fenced_at, renewed + LEASE_DURATION, lost[0])
        self.assertLess(fenced_at, acquired, lost[0])
        records = self.check_converged_and_exclusive(names, last)
        self.assertEqual([r for r in records[after_fence:] if r[2] == "host-a"], [])
        self.assertIn("the Lease was not renewed within renewDeadline", lost[0])
        self.assertEqual(b.stop(), 0, b.log()[-4000:])

    def test_a_takeover_written_into_the_lease_stops_the_leader_at_once(self):
        """Attack finding: when another holder appeared in the Lease (a token holder wrote
        holderIdentity), the old leader logged "standing by" and went on dispatching and writing
        until its renewDeadline (~8 s): two writers. It steps down as soon as it sees the new
        holder (its Lease watch, or its next renewal): its fence closes and it exits."""
        a = self.start("host-a")
        self.wait(lambda: self.holder() == "host-a", "host-a holds the Lease")
        names = ["t%03d" % i for i in range(OBJECTS)]
        stop, thread, last, errors = self.run_updates(names)
        try:
            self.wait(lambda: len(self.records()) > OBJECTS, "host-a reconciling")
            path = "/apis/coordination.k8s.io/v1/namespaces/%s/leases/%s" % (self.namespace,
                                                                             self.lease)
            status, lease = self.api.request("GET", path)
            self.assertEqual(status, 200, lease)
            now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
            lease["spec"].update({"holderIdentity": "intruder", "acquireTime": now,
                                  "renewTime": now})
            status, body = self.api.request("PUT", path, lease)
            self.assertEqual(status, 200, body)
            a.process.wait(RENEW_DEADLINE + 60)
            self.assertEqual(a.process.returncode, 1, a.log()[-4000:])
            lost = [line for line in a.log().splitlines() if "leadership lost" in line]
            self.assertTrue(lost, a.log()[-4000:])
            after = len(self.records())
            values = {name: self.child_value(name) for name in names}
            time.sleep(2)  # the updates go on; nothing may write the children any more
        finally:
            stop.set()
            thread.join(60)
        self.assertEqual(errors, [])
        # Stepped down on seeing the new holder, not at renewDeadline.
        self.assertIn("the Lease is held by intruder now", lost[0])
        self.assertNotIn("renewDeadline", lost[0])
        self.assertEqual(len(self.records()), after)
        self.assertEqual({name: self.child_value(name) for name in names}, values)
        self.assertEqual(self.holder(), "intruder")


if __name__ == "__main__":
    bazel_unittest.main()
