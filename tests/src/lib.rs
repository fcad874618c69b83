//! Test support for tether integration tests.
