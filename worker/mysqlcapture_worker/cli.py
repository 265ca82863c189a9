"""The `mysqlcapture` command (`python -m mysqlcapture_worker.cli`). It only loads `commands`, which does the work,
so that Ctrl-C while that loads (about the first second) ends the command with one line, as it does later, rather
than with an interpreter traceback.

SIGINT is held (blocked) while `commands` loads and taken after: an interrupt raised in the middle of an import can
land in one of the import system's own callbacks, where Python prints it as an ignored exception (a traceback) and
goes on as if it had not come."""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence

EXIT_INTERRUPTED = 130  # a shell's code for a command stopped by SIGINT


def main(argv: Sequence[str] | None = None) -> int:
    try:
        held = hasattr(signal, "pthread_sigmask")
        if held:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            from mysqlcapture_worker.commands import main as run
        finally:
            if held:
                interrupted = signal.SIGINT in signal.sigpending()
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # a pending one is delivered now
        if held and interrupted:
            raise KeyboardInterrupt
        return run(argv)
    except KeyboardInterrupt:
        print("mysqlcapture: interrupted before it started; nothing was written", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
