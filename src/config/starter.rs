//! The commented starter `axocoatl.yaml` that `axocoatl init` writes.

/// A config that validates as is, runs the offline `local` provider, and documents every
/// section in comments.
pub fn starter_config() -> &'static str {
    include_str!("starter.yaml")
}
