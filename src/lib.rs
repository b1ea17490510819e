//! The axocoatl runtime.
