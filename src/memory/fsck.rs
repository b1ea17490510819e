//! The memory checks of `fsck` that need the configuration: core blocks over their limit.

use axocoatl_store::fsck::Finding;
use axocoatl_store::Repo;

use crate::config::Config;

/// Core memory blocks longer than the limit `config` gives them.
pub fn oversize_blocks(repo: &Repo, config: &Config) -> Vec<Finding> {
    let limit_of = |owner: Option<&str>, label: &str| -> Option<u32> {
        match owner {
            Some(id) => {
                let agent = config.agent(super::agent_of(id)?)?;
                agent
                    .memory
                    .core
                    .effective_blocks()
                    .into_iter()
                    .find(|b| b.label == label && !b.shared)
                    .map(|b| b.limit)
            }
            None => config
                .agents
                .iter()
                .flat_map(|a| a.memory.core.effective_blocks())
                .filter(|b| b.label == label && b.shared)
                .map(|b| b.limit)
                .min(),
        }
    };
    axocoatl_store::memory::fsck::check_limits(repo, &limit_of)
}
