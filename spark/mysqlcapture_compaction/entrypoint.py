"""The image's Spark entrypoint (`local:///opt/mysqlcapture/entrypoint.py`): `mysqlcapture-compact` arguments."""

from __future__ import annotations

import sys

from mysqlcapture_compaction.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
