"""A long Table LIST (`kubectl get`) against the real `ctrlhost apiserver` is streamed row by row:
the server's memory does not grow with the size of the answer.

The server used to build a Table whole (its rows as nlohmann::json, then their text): for the
20,000 ConfigMaps here its peak RSS grew by about six times the bytes it sent (+150 MiB for a
23 MiB Table). Here they (2 KiB of data each) are read as a Table with kubectl's Accept header,
by a client that reads the answer in 16 KiB pieces with pauses (so the server waits on its
socket, as with a slow client) while the server's RSS is sampled; the peak growth (VmHWM, reset
before the read, and the samples) must stay under a quarter of the bytes received. kubectl
itself then reads the whole Table in one request (--chunk-size=0; by default it pages by 500).

Every wait is bounded; the assertions are on bytes and counts, never on durations.
"""

import http.client
import json
import threading
import time
import unittest

from apiserver_fixture import ApiServer, kubectl
from attack import vm_kib
from tools.internal import bazel_unittest

KUBECTL = "/usr/bin/kubectl"
# What kubectl get sends (k8s.io/cli-runtime's table request).
TABLE_ACCEPT = ("application/json;as=Table;v=v1;g=meta.k8s.io,"
                "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json")
ITEMS = 20000
CLIENTS = 4


def create_config_maps(api, namespace, count, body_of, clients=CLIENTS):
    """POSTs body_of(i) for i in range(count) to `namespace`'s ConfigMaps from `clients` threads,
    each on one keep-alive connection. Raises on the first answer other than 201."""
    errors = []

    def create(indexes):
        connection = api.connect(timeout=60)
        headers = {"Authorization": "Bearer " + api.token, "Accept": "application/json",
                   "Content-Type": "application/json"}
        try:
            for i in indexes:
                connection.request("POST", "/api/v1/namespaces/%s/configmaps" % namespace,
                                   body=json.dumps(body_of(i)), headers=headers)
                response = connection.getresponse()
                data = response.read()
                if response.status != 201:
                    errors.append("ConfigMap %d: %d %s" % (i, response.status, data[:300]))
                    return
                if errors:
                    return
        except (OSError, http.client.HTTPException) as e:
            errors.append(repr(e))
        finally:
            connection.close()

    threads = [threading.Thread(target=create, args=(range(k, count, clients),))
               for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    if errors or any(t.is_alive() for t in threads):
        raise AssertionError("creating %d ConfigMaps: %s" % (count, errors[:3] or "timed out"))


def config_map(i):
    """ConfigMap i: 2 KiB of data, and labels and an annotation as applied objects carry. A row
    of kubectl's Table holds the cells and the metadata (includeObject=Metadata), not the data:
    about 1 KB."""
    name = "cm-%05d" % i
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name,
                         "labels": {"app.kubernetes.io/name": "shop",
                                    "app.kubernetes.io/instance": "shop-%d" % (i % 50),
                                    "app.kubernetes.io/part-of": "store-front"},
                         "annotations": {"example.com/description": "configuration of %s: %s" %
                                                                    (name, "d" * 400)}},
            "data": {"settings": "s" * 2048}}


class TableListMemoryTest(unittest.TestCase):

    def test_a_long_table_list_is_streamed_not_materialised(self):
        # Durability is not what this test is about: normal sync makes the 20,000 creates quick.
        server = ApiServer.start(extra_args=("--storage-sync", "normal"))
        try:
            api = server.api
            api.ensure_namespace("big")
            create_config_maps(api, "big", ITEMS, config_map)
            pid = server.process.pid
            path = "/api/v1/namespaces/big/configmaps"
            # Warm the server's request path (a connection, its thread, a small Table), so that
            # what is measured below is the long answer only.
            for _ in range(3):
                status, _, data = api.raw_request("GET", path + "?limit=20",
                                                  headers={"Accept": TABLE_ACCEPT})
                self.assertEqual(status, 200, data[:300])
            # Reset the peak RSS (VmHWM) to the current RSS.
            with open("/proc/%d/clear_refs" % pid, "w") as f:
                f.write("5")
            before = vm_kib(pid, "VmRSS")
            sampled_peak = before
            connection = api.connect(timeout=60)
            connection.request("GET", path, headers={"Accept": TABLE_ACCEPT,
                                                     "Authorization": "Bearer " + api.token})
            response = connection.getresponse()
            self.assertEqual(response.status, 200)
            headers = {k.lower(): v for k, v in response.getheaders()}
            pieces = []
            received = 0
            while True:
                piece = response.read(16 * 1024)
                if not piece:
                    break
                pieces.append(piece)
                received += len(piece)
                sampled_peak = max(sampled_peak, vm_kib(pid, "VmRSS"))
                if len(pieces) % 8 == 0:
                    time.sleep(0.01)  # a slow reader: the server waits on its socket
            connection.close()
            peak = max(sampled_peak, vm_kib(pid, "VmHWM"))
            growth = (peak - before) * 1024
            print("Table LIST of %d ConfigMaps: %.1f MiB received, server peak RSS +%.1f MiB "
                  "(sampled +%.1f MiB)" % (ITEMS, received / (1 << 20), growth / (1 << 20),
                                          (sampled_peak - before) / 1024))

            self.assertGreater(received, 15 << 20)
            # Built whole, the Table weighed about six times its text in the server (+150 MiB
            # for 23 MiB); streamed, the server holds a chunk or two (+2 MiB).
            self.assertLess(growth, received / 4,
                            "the server's RSS grew by %d bytes for a Table of %d bytes" %
                            (growth, received))

            # Streamed (chunked, no Content-Length), and a whole, valid Table in key order.
            self.assertEqual(headers.get("transfer-encoding"), "chunked", headers)
            self.assertNotIn("content-length", headers)
            table = json.loads(b"".join(pieces))
            self.assertEqual((table["kind"], table["apiVersion"]), ("Table", "meta.k8s.io/v1"))
            self.assertNotIn("continue", table["metadata"])
            self.assertEqual([c["name"] for c in table["columnDefinitions"]],
                             ["Name", "Data", "Age"])
            self.assertEqual(len(table["rows"]), ITEMS)
            for i in (0, 1, ITEMS // 2, ITEMS - 1):
                row = table["rows"][i]
                self.assertEqual(row["cells"][:2], ["cm-%05d" % i, 1], i)
                self.assertEqual(row["object"]["kind"], "PartialObjectMetadata")
                self.assertEqual(row["object"]["metadata"]["name"], "cm-%05d" % i)
            self.assertEqual([row["cells"][0] for row in table["rows"]],
                             ["cm-%05d" % i for i in range(ITEMS)])

            # kubectl reads the whole streamed Table in one request and prints every row.
            result = kubectl(KUBECTL, server.kubeconfig, "--request-timeout=60s", "-n", "big",
                             "get", "configmaps", "--chunk-size=0", "--no-headers",
                             timeout=120)
            self.assertEqual(result.returncode, 0, result.stderr[-2000:])
            lines = result.stdout.splitlines()
            self.assertEqual(len(lines), ITEMS)
            self.assertEqual(lines[0].split()[:2], ["cm-00000", "1"])
            self.assertEqual(lines[-1].split()[:2], ["cm-%05d" % (ITEMS - 1), "1"])
        finally:
            server.stop()


if __name__ == "__main__":
    bazel_unittest.main()
