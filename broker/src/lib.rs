//! tether host library (work in progress).
