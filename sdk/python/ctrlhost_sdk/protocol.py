"""What the plugin and its gRPC server share: protocol constants, errors, and the interface the
server needs from a plugin.

The server (server.py) depends on this module only, never on plugin.py; the plugin (plugin.py)
imports the server to start it. So the package's imports form no cycle:

    plugin.py ──▶ server.py ──▶ protocol.py ◀── plugin.py

Anything with the members of `PluginHandler` can be served (tests serve fakes).
"""

from __future__ import annotations

import threading
from typing import Any, Callable, List, Optional, Protocol, Tuple

from ctrlhost_sdk._proto import pb

PROTOCOL_VERSION = "v1alpha1"
MAX_MESSAGE_BYTES = 64 << 20
SERVICE_NAME = "ctrlhost.plugin.v1alpha1.ControllerPluginService"
ADDRESS_ENV = "CTRLHOST_PLUGIN_ADDRESS"


class DescribeRefused(Exception):
    """Describe cannot be answered (FAILED_PRECONDITION)."""


class PluginHandler(Protocol):
    """What server.PluginServer calls. Thread-safety: `describe` and `handle` are called
    concurrently from the server's threads."""

    @property
    def max_message_bytes(self) -> int:
        """The largest message sent or received (both ways)."""

    def worker_count(self) -> int:
        """The number of reconciles run at once."""

    def describe(self, request: pb.DescribeRequest) -> pb.DescribeResponse:
        """The Describe answer; raises DescribeRefused when the host and plugin disagree."""

    def tasks_of(self, controller: str) -> List[Tuple[str, Callable[[Any], None]]]:
        """The background tasks (name, function) of a controller; [] for an unknown one."""

    @property
    def task_backoff(self) -> Tuple[float, float]:
        """A failed background task's first and largest restart delay, in seconds."""

    def handle(self, request_id: int, call: pb.ReconcileCall,
               cancelled: Optional[threading.Event] = None) -> pb.ReconcileResponse:
        """One reconcile; never raises. `cancelled` is set when the host cancels it."""
