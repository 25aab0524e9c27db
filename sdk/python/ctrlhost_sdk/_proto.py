"""The generated protocol modules, and grpc.health.v1 built at run time.

ctrlhost.plugin.v1alpha1 comes from the Bazel rule //proto/ctrlhost/plugin/v1alpha1:plugin_py
(or from protoc run by hand, see README.md).

grpc.health.v1 is defined here from its two small messages, in a private descriptor pool, rather
than imported: generated stubs for it would live in a Python package named "grpc", which
shadows grpcio itself (Bazel adds __init__.py files to runfiles), and grpcio-health-checking is
not packaged by Debian. A private pool also cannot clash with grpcio-health-checking when a
program loads both.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Tuple

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from ctrlhost.plugin.v1alpha1 import plugin_pb2 as pb  # noqa: F401
from ctrlhost.plugin.v1alpha1 import plugin_pb2_grpc as pb_grpc  # noqa: F401


def _health_messages() -> Tuple[Any, Any]:
    f = descriptor_pb2.FileDescriptorProto(name="ctrlhost_sdk/grpc_health_v1.proto",
                                           package="grpc.health.v1", syntax="proto3")
    T = descriptor_pb2.FieldDescriptorProto
    req = f.message_type.add(name="HealthCheckRequest")
    req.field.add(name="service", number=1, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    resp = f.message_type.add(name="HealthCheckResponse")
    enum = resp.enum_type.add(name="ServingStatus")
    for number, name in enumerate(["UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"]):
        enum.value.add(name=name, number=number)
    resp.field.add(name="status", number=1, type=T.TYPE_ENUM, label=T.LABEL_OPTIONAL,
                   type_name=".grpc.health.v1.HealthCheckResponse.ServingStatus")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    factory = message_factory.MessageFactory(pool)
    return (factory.GetPrototype(pool.FindMessageTypeByName("grpc.health.v1.HealthCheckRequest")),
            factory.GetPrototype(pool.FindMessageTypeByName("grpc.health.v1.HealthCheckResponse")))


HealthCheckRequest, HealthCheckResponse = _health_messages()
HEALTH_SERVICE = "grpc.health.v1.Health"


def add_health_to_server(check: Callable[[Any, Any], Any],
                         watch: Callable[[Any, Any], Iterator[Any]], server: Any) -> None:
    """Registers grpc.health.v1.Health with the functions check(request, context) and the
    generator watch(request, context)."""
    handlers = {
        "Check": grpc.unary_unary_rpc_method_handler(
            check, request_deserializer=HealthCheckRequest.FromString,
            response_serializer=HealthCheckResponse.SerializeToString),
        "Watch": grpc.unary_stream_rpc_method_handler(
            watch, request_deserializer=HealthCheckRequest.FromString,
            response_serializer=HealthCheckResponse.SerializeToString),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(HEALTH_SERVICE,
                                                                          handlers),))


class HealthStub:
    """A client of grpc.health.v1.Health (for tests and tools)."""

    def __init__(self, channel: Any) -> None:
        self.Check = channel.unary_unary(
            "/grpc.health.v1.Health/Check", request_serializer=HealthCheckRequest.SerializeToString,
            response_deserializer=HealthCheckResponse.FromString)
        self.Watch = channel.unary_stream(
            "/grpc.health.v1.Health/Watch", request_serializer=HealthCheckRequest.SerializeToString,
            response_deserializer=HealthCheckResponse.FromString)
