"""Resource builders and the config hash (the same vectors as sdk/cpp builders_test)."""

import unittest

from ctrlhost_sdk import (CONFIG_HASH_ANNOTATION, Request, build_cluster_role_binding,
                          build_config_map, build_deployment, build_role, build_role_binding,
                          build_secret, build_service, build_service_account, canonical_json,
                          common_labels, config_hash, owner_reference, policy_rule,
                          selector_labels, service_account_subject, service_port)
from tools.internal import bazel_unittest


class ConfigHashTest(unittest.TestCase):
    def test_same_vectors_in_every_language(self):
        self.assertEqual(config_hash({}), "9bf65e00c699fdaf")
        self.assertEqual(config_hash({"b": "2", "a": "1"}), "18ceba3ee263f773")
        order = {"10": "x", "9": "y", "\u00e9": "z", "\U0001F600": "w", "\uff5e": "v",
                 "B": "u", "a": "t"}
        self.assertEqual(canonical_json(order),
                         '{"10":"x","9":"y","B":"u","a":"t","\u00e9":"z","\uff5e":"v",'
                         '"\U0001F600":"w"}')
        self.assertEqual(config_hash(order), "87ce159c5184d88c")
        self.assertEqual(config_hash({"q": "say \"hi\"\n\t\\ \x01 \x7f /"}), "07165b820114a692")
        nested = {"list": [1, -2, True, None, {"z": 1, "y": []}], "n": 9007199254740992.0}
        self.assertEqual(canonical_json(nested),
                         '{"list":[1,-2,true,null,{"y":[],"z":1}],"n":9007199254740992}')
        self.assertEqual(config_hash(nested), "3abc398a2c0b7b37")

    def test_refuses_numbers_other_languages_would_write_differently(self):
        with self.assertRaises(ValueError):
            config_hash({"x": 1.5})
        with self.assertRaises(ValueError):
            config_hash({"x": 1e300})
        self.assertEqual(config_hash({"x": 2.0}), config_hash({"x": 2}))


class BuildersTest(unittest.TestCase):
    def test_deployment_and_service(self):
        d = build_deployment("shop", labels=common_labels("webapp", "shop"),
                             selector=selector_labels("webapp", "shop"), replicas=3,
                             containers=[{"name": "web", "image": "nginx"}],
                             pod_annotations={CONFIG_HASH_ANNOTATION: "abc"})
        self.assertEqual(d["metadata"]["labels"]["app.kubernetes.io/managed-by"], "ctrlhost")
        self.assertEqual(d["spec"]["selector"]["matchLabels"], selector_labels("webapp", "shop"))
        self.assertEqual(d["spec"]["template"]["metadata"],
                         {"labels": common_labels("webapp", "shop"),
                          "annotations": {"ctrlhost.dev/config-hash": "abc"}})
        self.assertEqual(d["spec"]["replicas"], 3)
        s = build_service("shop", selector=selector_labels("webapp", "shop"),
                          ports=[service_port(80, "http", "http"),
                                 service_port(53, protocol="UDP"), {"port": 1}])
        self.assertEqual(s["spec"]["ports"], [
            {"name": "http", "port": 80, "protocol": "TCP", "targetPort": "http"},
            {"port": 53, "protocol": "UDP"}, {"port": 1, "protocol": "TCP"}])
        self.assertNotIn("labels", s["metadata"])

    def test_rbac_and_plain_objects(self):
        labels = common_labels("app", "x")
        role = build_role("reader", [policy_rule([""], ["configmaps"], ["get"])], labels=labels)
        self.assertEqual(role["apiVersion"], "rbac.authorization.k8s.io/v1")
        self.assertEqual(role["rules"][0]["resources"], ["configmaps"])
        binding = build_cluster_role_binding("reader", "reader",
                                             [service_account_subject("runner", "team-a")],
                                             labels=labels)
        self.assertEqual(binding["roleRef"], {"apiGroup": "rbac.authorization.k8s.io",
                                              "kind": "ClusterRole", "name": "reader"})
        self.assertEqual(build_role_binding("reader", "reader")["subjects"], [])
        self.assertEqual(build_secret("s", {"token": "t"}, "Opaque")["stringData"],
                         {"token": "t"})
        self.assertEqual(build_service_account("runner"),
                         {"apiVersion": "v1", "kind": "ServiceAccount",
                          "metadata": {"name": "runner"}})
        self.assertEqual(build_config_map(data={})["data"], {})

    def test_owner_reference_names_the_primary(self):
        req = Request.for_object({"apiVersion": "example.com/v1", "kind": "App",
                                  "metadata": {"name": "shop", "namespace": "a", "uid": "u-1"}})
        ref = owner_reference(req)
        self.assertEqual(ref, {"apiVersion": "example.com/v1", "kind": "App", "name": "shop",
                               "uid": "u-1", "controller": True, "blockOwnerDeletion": True})
        self.assertEqual(build_config_map(owner=ref)["metadata"]["ownerReferences"], [ref])


if __name__ == "__main__":
    bazel_unittest.main()
