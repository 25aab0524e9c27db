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
converges. The chaos plugin logs "<key> <attempt> start|end <host> <pid>" for each reconcile,
appended (O_APPEND) by every plugin to one file: per operator, once a host started anything of
it no other host starts anything of it any more, and beta's keys were only ever reconciled by
host-b: each operator had exactly one leader at a time and no key was reconciled by two hosts.
"""

import os
import tempfile
import threading
import time
import unittest

import yaml

from e2e.host import host_fixture

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

LEASES = "ol-leases"
NAMESPACES = {"alpha": "ol-alpha", "beta": "ol-beta"}


class OperatorLeaseTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.server, cls.kubeconfig, cls.api = host_fixture.shared_server(
            host_fixture.runfile("e2e/host/chaos/crd.yaml"), "e2e.ctrlhost.dev/v1")
        cls.chaos = host_fixture.runfile("e2e/host/chaos/chaos")

    @classmethod
    def tearDownClass(cls):
        if cls.server is not None:
            cls.server.stop()

    @staticmethod
    def wait(condition, what, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = condition()
            if value:
                return value
            time.sleep(0.05)
        raise AssertionError("timed out after %ss waiting for %s" % (timeout, what))

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="oplease-", dir=os.environ.get("TEST_TMPDIR"))
        for namespace in [LEASES, *NAMESPACES.values()]:
            self.api.ensure_namespace(namespace)
        self.hosts = []

    def tearDown(self):
        for host in self.hosts:
            host.kill()

    # --- helpers ----------------------------------------------------------------------------

    def operators(self, host):
        return "---\n".join(
            OPERATOR.format(name=name, chaos=self.chaos, dir=self.dir, host=host,
                            namespace=namespace, leases=LEASES, lease_duration=LEASE_DURATION,
                            renew_deadline=RENEW_DEADLINE, retry_period=RETRY_PERIOD)
            for name, namespace in sorted(NAMESPACES.items()))

    def start(self, name):
        host = host_fixture.Host.start(self.operators(name), kubeconfig=self.kubeconfig,
                                       extra_args=["--leader-elect-identity", name])
        self.hosts.append(host)
        return host

    def lease_spec(self, operator):
        status, body = self.api.request(
            "GET", "/apis/coordination.k8s.io/v1/namespaces/%s/leases/ctrlhost-%s" %
            (LEASES, operator))
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

    def records(self):
        """The chaos log: [(key, what, host)] of both operators' namespaces."""
        path = os.path.join(self.dir, "log")
        if not os.path.exists(path):
            return []
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        out = []
        for line in lines:
            fields = line.split(" ")
            if len(fields) >= 4:
                out.append((fields[0], fields[2], fields[3]))
        return out

    def hold_lease_for(self, operator, identity):
        """Creates the operator's Lease held by `identity` (long enough not to expire here)."""
        now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
        status, body = self.api.request(
            "POST", "/apis/coordination.k8s.io/v1/namespaces/%s/leases" % LEASES,
            {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "ctrlhost-" + operator, "namespace": LEASES},
             "spec": {"holderIdentity": identity, "leaseDurationSeconds": 60,
                      "acquireTime": now, "renewTime": now, "leaseTransitions": 0}})
        self.assertEqual(status, 201, body)

    def operator_of(self, key):
        for name, namespace in NAMESPACES.items():
            if key.startswith(namespace + "/"):
                return name
        return None

    # --- the scenario -----------------------------------------------------------------------

    def test_two_hosts_spread_two_operators_and_take_over_at_sigterm(self):
        names = ["o%03d" % i for i in range(OBJECTS)]
        for namespace in NAMESPACES.values():
            for name in names:
                self.assertIn(self.put_chaos(namespace, name, 0), (200, 201))
        self.hold_lease_for("beta", "host-b")

        a = self.start("host-a")
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

        # Where users look: /readyz names each operator's state, the dump each Lease's.
        status, ready = b.endpoint("/readyz?verbose")
        self.assertEqual(status, 200, ready)
        self.assertIn("[+]leader ok: operator alpha: standby (Lease %s/ctrlhost-alpha, leader "
                      "host-a); operator beta: leading (Lease %s/ctrlhost-beta)" %
                      (LEASES, LEASES), ready)
        _, dump = a.endpoint("/debug/dump")
        leases = {entry["operator"]: entry
                  for entry in yaml.safe_load(dump)["operatorLeases"]}
        self.assertEqual(leases["alpha"]["lease"], LEASES + "/ctrlhost-alpha")
        self.assertEqual(leases["alpha"]["identity"], "host-a")
        self.assertEqual(leases["alpha"]["state"], "leader")
        self.assertEqual(leases["alpha"]["dispatching"], True)
        self.assertEqual(leases["alpha"]["writesAllowed"], True)
        self.assertEqual(leases["beta"]["state"], "standby")
        self.assertEqual(leases["beta"]["holder"], "host-b")
        self.assertEqual(leases["beta"]["dispatching"], False)
        self.assertEqual(leases["beta"]["writesAllowed"], False)

        for namespace in NAMESPACES.values():
            self.wait(lambda: sorted(self.child_values(namespace).items()) ==
                      [(n, "0") for n in names], "%s reconciled once" % namespace)
        records = self.records()
        for key, _, host in records:
            self.assertEqual(host, "host-a" if self.operator_of(key) == "alpha" else "host-b",
                             "a standby reconciled %s" % key)

        stop = threading.Event()
        last = {(ns, n): 0 for ns in NAMESPACES.values() for n in names}
        errors = []

        def updater():
            value = 0
            while not stop.is_set():
                value += 1
                for namespace in NAMESPACES.values():
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
        try:
            self.wait(lambda: any(r[2] == "host-a" and r[1] == "start"
                                  for r in self.records()[len(records):]),
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
        for namespace in NAMESPACES.values():
            def unconverged(namespace=namespace):
                values = self.child_values(namespace)
                return [n for n in names if values.get(n) != str(last[(namespace, n)])]
            self.wait(lambda: not unconverged(), "%s converged" % namespace)
        self.assertEqual(self.master_status(b, "alpha"), 1)
        self.assertEqual(self.master_status(b, "beta"), 1)

        records = self.records()
        # Per operator one leader at a time: once host-b started a key of alpha, host-a started
        # nothing more of alpha; beta only ever ran on host-b.
        alpha = [r for r in records if self.operator_of(r[0]) == "alpha"]
        first_b = next((i for i, r in enumerate(alpha) if r[2] == "host-b"), None)
        self.assertIsNotNone(first_b, "host-b never reconciled alpha")
        self.assertEqual([r for r in alpha[first_b:] if r[2] == "host-a"], [],
                         "host-a reconciled alpha after host-b started it")
        self.assertGreater(first_b, 0)
        self.assertEqual({r[2] for r in records if self.operator_of(r[0]) == "beta"},
                         {"host-b"})
        # No key reconciled twice at once, by one host or by two.
        running = {}
        for key, what, host in records:
            if what == "start":
                self.assertFalse(running.get(key), "%s reconciled twice at once" % key)
                running[key] = host
            elif running.get(key) == host:
                running[key] = None
        self.assertEqual(b.stop(), 0, b.log()[-4000:])


if __name__ == "__main__":
    unittest.main()
