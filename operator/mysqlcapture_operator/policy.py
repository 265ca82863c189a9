"""What a capture may run is the cluster administrator's decision, not its author's.

A MySQLCapture makes the operator create a Deployment and a Spark job. Whoever may write a capture
must not get, through it, a pod running an image of their choice (with the capture's Secret in its
environment) or a Spark driver running their code under the compaction ServiceAccount: the images
come from the operator's settings (chart values) or an allow-list there, and `spec.compaction.sparkConf`
may only set keys under prefixes the administrator allows (by default: sizing and SQL settings, no
key that picks an image, an identity, a pod template, a Secret or code to load).
"""

from __future__ import annotations

from collections.abc import Iterable

from mysqlcapture_api.spec import MySQLCapture

from mysqlcapture_operator.settings import OperatorSettings
from mysqlcapture_operator.status import Problem

ALLOWED_IMAGES_VALUE = "allowedImages"
ALLOWED_SPARK_CONF_VALUE = "compaction.allowedSparkConf"
ALLOWED_SERVICE_ACCOUNTS_VALUE = "allowedServiceAccounts"


def image_allowed(image: str, default: str, allowed: Iterable[str]) -> bool:
    """The default image, or one the allow-list names exactly or by a prefix ending in `*`."""
    if image == default:
        return True
    return any(image == a or (a.endswith("*") and image.startswith(a[:-1])) for a in allowed)


def spark_conf_allowed(key: str, allowed: Iterable[str]) -> bool:
    """A key the allow-list names exactly, or under a prefix of it ending in `.`."""
    return any(key == a or (a.endswith(".") and key.startswith(a)) for a in allowed)


def policy_problem(capture: MySQLCapture, settings: OperatorSettings) -> Problem | None:
    """Why the operator may not run what `capture` asks for, naming the field and the fix; None when it may."""
    spec = capture.spec
    asked = [
        ("spec.workerImage", spec.worker_image, settings.worker_image),
        ("spec.compaction.image", spec.compaction.image, settings.compaction_image),
    ]
    for field, image, default in asked:
        if image is not None and not image_allowed(image, default, settings.allowed_images):
            return Problem(
                "ImageNotAllowed",
                f"{field} {image!r} is not an image this operator runs: remove {field} to use {default!r}, or "
                f"ask the cluster administrator to allow it (chart value {ALLOWED_IMAGES_VALUE})",
            )
    account = spec.service_account_name
    if account is not None and account not in settings.allowed_service_accounts:
        return Problem(
            "ServiceAccountNotAllowed",
            f"spec.serviceAccountName {account!r} is not an identity this operator runs workers as: remove it to use "
            f"the namespace's default, or ask the cluster administrator to allow it (chart value "
            f"{ALLOWED_SERVICE_ACCOUNTS_VALUE})",
        )
    refused = sorted(k for k in spec.compaction.spark_conf if not spark_conf_allowed(k, settings.allowed_spark_conf))
    if refused:
        return Problem(
            "SparkConfNotAllowed",
            f"spec.compaction.sparkConf sets {', '.join(refused)}, which this operator does not allow (keys under "
            f"{', '.join(settings.allowed_spark_conf)}): remove them, or ask the cluster administrator to allow "
            f"them (chart value {ALLOWED_SPARK_CONF_VALUE})",
        )
    return None
