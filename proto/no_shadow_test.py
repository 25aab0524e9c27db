"""`import grpc` next to every generated Python protocol package is grpcio itself: no generated
package (e.g. grpc/health/v1, whose "grpc" directory Bazel completes with __init__.py files)
shadows it. Failed while //proto/grpc/health/v1:health_py existed and was in the deps."""

import unittest

from tools.internal import bazel_unittest


class NoShadowTest(unittest.TestCase):

    def test_grpc_is_grpcio(self):
        import grpc
        self.assertTrue(hasattr(grpc, "insecure_channel"), grpc.__file__)
        self.assertNotIn("/proto/", grpc.__file__ or "")
        from ctrlhost.plugin.v1alpha1 import plugin_pb2_grpc  # noqa: F401 (imports grpc too)


if __name__ == "__main__":
    bazel_unittest.main()
