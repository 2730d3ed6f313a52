//! End-to-end tests live in `tests/tests/e2e/`: one test binary, `e2e`.
