//! Agent memory tiers beneath one runtime Agent id (`{session}:{agent}`): core blocks, the
//! daily log and semantic memory.
//!
//! `semantic` (Tier 4: recall by similarity over retained source text) and `embed` (the
//! local sentence embedder it uses) are self-contained: the other tiers call their public
//! API only.

pub mod embed;
pub mod semantic;
