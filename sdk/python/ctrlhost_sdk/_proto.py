"""The generated protocol modules.

ctrlhost.plugin.v1alpha1 comes from the Bazel rule //proto/ctrlhost/plugin/v1alpha1:plugin_py
(or from protoc run by hand, see README.md). The health protocol is grpc.health.v1: from
grpcio-health-checking (`grpc_health.v1`) when it is installed, else from the stubs generated
by //proto/grpc/health/v1:health_py, whose package name "grpc" is grpcio's own; those are made
importable by adding their directory to the grpc package's search path.
"""

import os
import sys

import grpc

from ctrlhost.plugin.v1alpha1 import plugin_pb2 as pb  # noqa: F401
from ctrlhost.plugin.v1alpha1 import plugin_pb2_grpc as pb_grpc  # noqa: F401


def _load_health():
    try:
        from grpc_health.v1 import health_pb2, health_pb2_grpc  # type: ignore

        return health_pb2, health_pb2_grpc
    except ImportError:
        pass
    for entry in sys.path:
        candidate = os.path.join(entry or ".", "grpc")
        if os.path.isfile(os.path.join(candidate, "health", "v1", "health_pb2.py")):
            if candidate not in grpc.__path__:
                grpc.__path__.append(candidate)
            break
    from grpc.health.v1 import health_pb2, health_pb2_grpc  # type: ignore

    return health_pb2, health_pb2_grpc


health_pb2, health_pb2_grpc = _load_health()
