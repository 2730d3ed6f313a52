//! The test kit's own tests, in one binary: the conformance kit against the fake, and the
//! fake's rules.

mod conformance;
mod fake;
