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

/// Core memory blocks over their limit, with the limits of the configuration `locator`
/// finds (as every command finds it). `Err` says why the limits could not be checked; a
/// repository without a configuration file has no limits to check.
pub fn oversize_blocks_located(
    repo: &Repo,
    locator: &crate::workspace::Locator,
) -> Result<Vec<Finding>, String> {
    let path = match &locator.config {
        Some(p) if p.is_absolute() => p.clone(),
        Some(p) => locator.cwd.join(p),
        None => repo.workdir().join(crate::workspace::CONFIG_FILE),
    };
    if !path.exists() {
        return Ok(Vec::new());
    }
    match crate::config::load(&path) {
        Ok(loaded) => Ok(oversize_blocks(repo, &loaded.config)),
        Err(_) => Err(format!(
            "core memory block limits were not checked: {} does not validate (run `axocoatl validate`)",
            path.display()
        )),
    }
}
