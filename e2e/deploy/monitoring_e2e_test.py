"""Every metric the Grafana dashboard and the Prometheus alert rules in deploy/monitoring name is
exported by a running host (the host, the WebApp plugin and one reconciled WebApp, so that every
family has samples). A renamed or never-exported metric fails here, not on a blank panel."""

import json
import os
import re
import unittest

import yaml

from e2e.host import host_fixture
from tools.internal import bazel_unittest

OPERATOR = """\
apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata:
  name: web
spec:
  plugins:
    - name: webapp
      exec:
        command: {webapp}
"""

# Names of metrics ctrlhost exports; `up` and other Prometheus-made series are not ours.
OUR_METRIC = re.compile(r"\b((?:ctrlhost|controller_runtime|workqueue)_[a-z0-9_]+)\b")


def named_metrics():
    """{metric name: [where it is used]} over the dashboard's and the rules' expressions."""
    used = {}
    with open(host_fixture.runfile("deploy/monitoring/dashboard.json")) as f:
        dashboard = json.load(f)
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            for name in OUR_METRIC.findall(target["expr"]):
                used.setdefault(name, []).append("dashboard panel %r" % panel["title"])
    with open(host_fixture.runfile("deploy/monitoring/alerts.yaml")) as f:
        rules = yaml.safe_load(f)
    for group in rules["groups"]:
        for rule in group["rules"]:
            for name in OUR_METRIC.findall(rule["expr"]):
                used.setdefault(name, []).append("alert %s" % rule["alert"])
    return used


class MonitoringTest(unittest.TestCase):

    def test_every_named_metric_is_exported(self):
        used = named_metrics()
        self.assertGreater(len(used), 10, used)
        host = host_fixture.start_host(OPERATOR.format(
            webapp=host_fixture.runfile("plugins/webapp/webapp")))
        try:
            host.kubectl("apply", "-f", host_fixture.runfile("plugins/webapp/deploy/crd.yaml"),
                         check=True)
            host.kubectl("apply", "-f", "-", check=True, input_text="""
apiVersion: apps.ctrlhost.dev/v1alpha1
kind: WebApp
metadata: {name: shop, namespace: default}
spec: {image: nginx:1.25, replicas: 1}
""")
            # Read before the first reconcile: the series appears with it.
            host.wait_for(
                lambda: host.metric("controller_runtime_reconcile_total", default=0) or None,
                "a reconcile")
            exported = set()
            for line in host.metrics().splitlines():
                if line and not line.startswith("#"):
                    exported.add(re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0))
        finally:
            self.assertEqual(host.stop(), 0, host.log()[-4000:])
        missing = {name: where for name, where in used.items() if name not in exported}
        self.assertEqual(missing, {}, "named in deploy/monitoring but not exported")


if __name__ == "__main__":
    bazel_unittest.main()
