"""The engine's one error: the stream cannot be processed further."""

from __future__ import annotations


class CaptureError(RuntimeError):
    """The stream cannot be processed further; the message says what and how to fix it."""
