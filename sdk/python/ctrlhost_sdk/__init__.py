"""ctrlhost plugin SDK for Python: write controllers as out-of-process ctrlhost plugins.

    from ctrlhost_sdk import Controller, Plugin, Result

    hello = Controller("hello").for_("example.com", "v1", "Hello").owns("", "v1", "ConfigMap")

    @hello.reconcile
    def reconcile(req):
        result = Result()
        result.desire(new_object("v1", "ConfigMap", req.name))["data"] = {"hi": req.name}
        return result

    Plugin("hello", "0.1.0").add(hello)

See README.md for the whole API.
"""

from ctrlhost_sdk._proto import pb
from ctrlhost_sdk.builders import (
    CONFIG_HASH_ANNOTATION,
    build_cluster_role,
    build_cluster_role_binding,
    build_config_map,
    build_deployment,
    build_role,
    build_role_binding,
    build_secret,
    build_service,
    build_service_account,
    canonical_json,
    common_labels,
    config_hash,
    owner_reference,
    policy_rule,
    selector_labels,
    service_account_subject,
    service_port,
)
from ctrlhost_sdk.chain import ChainState, DependentChain, is_subset
from ctrlhost_sdk.controller import Controller
from ctrlhost_sdk.crud import CrudPlan, CrudResource
from ctrlhost_sdk.handlers import Handlers
from ctrlhost_sdk.operator_status import set_operator_status
from ctrlhost_sdk.stage_callbacks import (
    POST_CREATE,
    POST_DELETE,
    POST_UPDATE,
    PRE_CREATE,
    PRE_DELETE,
    PRE_UPDATE,
    StageCallbacks,
)
from ctrlhost_sdk.pass_context import UPDATE_ALLOWED, UPDATE_NECESSARY, PassContext, freeze_onto
from ctrlhost_sdk.plugin import Plugin, parse_address
from ctrlhost_sdk.resource_sets import ResourceRouter, ResourceSet
from ctrlhost_sdk.request import Object, Request, RequestError, find_path
from ctrlhost_sdk.tasks import TaskContext
from ctrlhost_sdk.result import (
    FALSE,
    JSON_PATCH,
    MERGE_PATCH,
    NORMAL,
    RETRYABLE,
    TERMINAL,
    TRUE,
    UNKNOWN,
    WARNING,
    InvalidResult,
    ReconcileError,
    Result,
    compose_merge_patch,
    new_object,
)

__version__ = "0.1.0"

__all__ = [
    "CrudPlan", "CrudResource",
    "set_operator_status",
    "ResourceRouter", "ResourceSet",
    "POST_CREATE", "POST_DELETE", "POST_UPDATE", "PRE_CREATE", "PRE_DELETE", "PRE_UPDATE",
    "StageCallbacks", "is_subset",
    "CONFIG_HASH_ANNOTATION", "build_cluster_role", "build_cluster_role_binding",
    "build_config_map", "build_deployment", "build_role", "build_role_binding", "build_secret",
    "build_service", "build_service_account", "canonical_json", "common_labels", "config_hash",
    "owner_reference", "policy_rule", "selector_labels", "service_account_subject",
    "service_port",
    "ChainState", "DependentChain", "PassContext", "UPDATE_ALLOWED", "UPDATE_NECESSARY",
    "freeze_onto", "Controller", "FALSE", "Handlers", "InvalidResult", "JSON_PATCH", "MERGE_PATCH", "NORMAL",
    "Object", "Plugin", "RETRYABLE", "ReconcileError", "Request", "RequestError", "Result",
    "TERMINAL", "TRUE", "UNKNOWN", "WARNING", "compose_merge_patch", "find_path", "new_object",
    "parse_address", "pb", "TaskContext",
]
