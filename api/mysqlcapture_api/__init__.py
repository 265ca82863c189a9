"""The MySQLCapture API: the one definition of the custom resource, shared by the worker and the operator."""

GROUP = "cdc.mysqlcapture.io"
VERSION = "v1alpha1"
KIND = "MySQLCapture"
PLURAL = "mysqlcaptures"
API_VERSION = f"{GROUP}/{VERSION}"
