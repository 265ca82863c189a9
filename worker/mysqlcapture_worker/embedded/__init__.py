"""Private MariaDB servers started by the project itself: the embedded default of `make demo` and the tests."""
