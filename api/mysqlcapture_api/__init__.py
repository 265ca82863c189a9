"""The MySQLCapture API: the custom resource and the worker's /status document, shared by worker and operator."""

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
from mysqlcapture_api.worker_status import WorkerStatus, WorkerStatusError, parse_worker_status

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
    "WorkerStatus",
    "WorkerStatusError",
    "load_manifest",
    "parse_worker_status",
    "validate_manifest",
]
