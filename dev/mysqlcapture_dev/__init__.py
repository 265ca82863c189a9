"""Development tooling, not shipped in any image: `make demo` and the private servers the tests and the demo start."""
