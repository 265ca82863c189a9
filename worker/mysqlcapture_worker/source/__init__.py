"""The source server: its statements by flavor and version (`dialect`) and every query about its state (`queries`)."""
