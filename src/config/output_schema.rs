//! An agent's `output_schema:`: it must name a schema of the supported subset, and only an
//! autonomous agent's replies are checked against one.

use std::path::Path;

use axocoatl_store::objects::Objects;

use super::types::{AgentConfig, AgentRole};
use super::validate::{at, Checker};
use crate::schema::ResolveError;

pub(super) fn check(c: &mut Checker<'_>, i: usize, agent: &AgentConfig) {
    let id = agent.id.as_str();
    let Some(value) = &agent.output_schema else {
        if agent.schema_retries.is_some() {
            c.warning(
                c.key(at!["agents", i, "schema_retries"]),
                format!("agent `{id}`: schema_retries does nothing without output_schema"),
                "set `output_schema:` too, or remove `schema_retries`",
            );
        }
        return;
    };
    let pos = c.value(at!["agents", i, "output_schema"]);
    if agent.role != AgentRole::Autonomous {
        c.error(
            pos,
            format!(
                "agent `{id}`: output_schema on a coordinator or a worker is not supported yet"
            ),
            "give the schema to an autonomous agent, or check the reply with `send --schema`",
        );
        return;
    }
    let base = c.file.parent().unwrap_or(Path::new("."));
    // Stored schemas are in the repository beside the configuration; an id that is not
    // found there is checked when a turn uses it.
    let repo = base.join(axocoatl_store::layout::REPO_DIR);
    let objects = Objects::new(&repo.join(axocoatl_store::layout::OBJECTS_DIR));
    match crate::schema::resolve_value(value, base, &objects) {
        Ok(_) | Err(ResolveError::NotFound { .. }) | Err(ResolveError::Ambiguous { .. }) => {}
        Err(ResolveError::Invalid(e)) => {
            c.error(pos, format!("agent `{id}`: output_schema: {}", e.message), e.hint)
        }
        Err(e) => c.error(
            pos,
            format!("agent `{id}`: output_schema: {e}"),
            "give a JSON Schema file that exists (relative to this file), JSON Schema in YAML, or the concise form ('name, age int')",
        ),
    }
}
