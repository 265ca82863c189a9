"""The capture engine: turns normalized binlog events into ordered change events and checkpoints.

It is a pure state machine over the event stream (no I/O but the schema history's write-ahead
record and the transaction buffer's spill file): transactions are buffered until their commit,
DDL updates the schema, and every emitted `Chunk` carries the position to checkpoint once that
chunk is durably in the sink.

`capture` dispatches the events; `transaction` assembles one transaction and cuts it into sink
commits; `ddl` applies schema changes; `tables` maps table ids to decoders; `rows` renders rows
events (compiled path and Python reference path); `heartbeat` reads the heartbeat table's rows.
"""

from mysqlcapture_worker.engine.capture import CaptureEngine
from mysqlcapture_worker.engine.errors import CaptureError
from mysqlcapture_worker.engine.rendering import render
from mysqlcapture_worker.engine.transaction import Chunk

__all__ = ["CaptureEngine", "CaptureError", "Chunk", "render"]
