"""The CDC worker: streams a MySQL/MariaDB binlog into an exactly-once change log."""

import os

# NumPy comes in with PyArrow's pandas shim; its OpenBLAS starts a thread per core that spins after each call,
# CPU the worker never needs (it does no linear algebra) and the snapshot's readers do. Set before NumPy loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
