"""The MySQLCapture API: the one definition of the custom resource, shared by the worker and the operator."""

from mysqlcapture_api.manifest import ManifestError, load_manifest, validate_manifest
from mysqlcapture_api.spec import (
    API_VERSION,
    GROUP,
    KIND,
    PLURAL,
    SHORT_NAME,
    SINGULAR,
    VERSION,
    MySQLCapture,
    MySQLCaptureSpec,
)
from mysqlcapture_api.status import Condition, MySQLCaptureStatus

__all__ = [
    "API_VERSION",
    "GROUP",
    "KIND",
    "PLURAL",
    "SHORT_NAME",
    "SINGULAR",
    "VERSION",
    "Condition",
    "ManifestError",
    "MySQLCapture",
    "MySQLCaptureSpec",
    "MySQLCaptureStatus",
    "load_manifest",
    "validate_manifest",
]
