//! A loopback HTTP server that speaks real protocols byte for byte (filled in by the providers work).
