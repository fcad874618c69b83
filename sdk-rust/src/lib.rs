//! tether plugin SDK (work in progress).
