"""The generated Python admin API imports the plugin protocol's types and round-trips them."""

import unittest

from ctrlhost.admin.v1alpha1 import admin_pb2 as pb
from ctrlhost.admin.v1alpha1 import admin_pb2_grpc as pb_grpc
from ctrlhost.plugin.v1alpha1 import plugin_pb2
from tools.internal import bazel_unittest


class AdminMessagesTest(unittest.TestCase):
    def test_service_is_generated(self):
        self.assertTrue(hasattr(pb_grpc, "AdminServiceStub"))
        self.assertTrue(hasattr(pb_grpc, "add_AdminServiceServicer_to_server"))

    def test_plugin_round_trips_with_imported_types(self):
        plugin = pb.Plugin(
            operator="web",
            name="webapp",
            state=pb.PLUGIN_STATE_READY,
            source=pb.PluginSource(
                exec=pb.ExecSource(command="/bin/web", args=["-v"], env={"A": "<redacted>"})
            ),
            swap_generation=3,
            capabilities=[plugin_pb2.CAPABILITY_CONDITIONS],
            work=pb.WorkFigures(in_flight=2, max_in_flight=64, queued=5),
        )
        back = pb.Plugin.FromString(plugin.SerializeToString())
        self.assertEqual(back, plugin)
        self.assertEqual(back.source.WhichOneof("kind"), "exec")
        self.assertEqual(dict(back.source.exec.env), {"A": "<redacted>"})
        self.assertEqual(list(back.capabilities), [plugin_pb2.CAPABILITY_CONDITIONS])

    def test_unset_enums_read_as_zero(self):
        self.assertEqual(pb.Plugin().state, pb.PLUGIN_STATE_UNSPECIFIED)
        self.assertEqual(pb.Controller().state, pb.CONTROLLER_STATE_UNSPECIFIED)
        self.assertEqual(pb.Operator().state, pb.OPERATOR_STATE_UNSPECIFIED)
        self.assertEqual(pb.SwapFailed().reason, pb.SWAP_FAILURE_REASON_UNSPECIFIED)
        self.assertIsNone(pb.SwapPluginRequest().WhichOneof("action"))


if __name__ == "__main__":
    bazel_unittest.main()
