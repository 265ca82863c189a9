"""The `mysqlcapture` command (`python -m mysqlcapture_worker.cli`). It only loads `commands`, which does the work,
so that Ctrl-C while that loads (about the first second) ends the command with one line, as it does later, rather
than with an interpreter traceback: an interrupt raised while a module is imported reaches only its importer."""

from __future__ import annotations

import sys
from collections.abc import Sequence

EXIT_INTERRUPTED = 130  # a shell's code for a command stopped by SIGINT


def main(argv: Sequence[str] | None = None) -> int:
    try:
        from mysqlcapture_worker.commands import main as run

        return run(argv)
    except KeyboardInterrupt:
        print("mysqlcapture: interrupted before it started; nothing was written", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
