//! Conformance kit (I41).
