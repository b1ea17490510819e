//! A build without the `mcp` feature: every MCP server is unavailable, said plainly.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::CallResult;
use super::Prepared;
use crate::config::McpServerConfig;
use crate::provider::Cancel;

const WHY: &str =
    "MCP servers are not supported by this build of axocoatl (built without the `mcp` feature)";

#[derive(Debug)]
pub struct Hub;

impl Hub {
    pub fn new(_configs: &BTreeMap<String, McpServerConfig>, _dir: &Path) -> Result<Hub, String> {
        Err(WHY.to_owned())
    }

    pub fn prepare(&self, _names: &[String], _cancel: &Cancel) -> Prepared {
        Prepared::default()
    }

    pub fn call(&self, _server: &str, _tool: &str, _args: &Value, _cancel: &Cancel) -> CallResult {
        CallResult::error(WHY.to_owned())
    }

    pub fn revive(&self, _cancel: &Cancel) -> Vec<String> {
        Vec::new()
    }

    pub fn status(&self) -> Vec<super::McpServerStatus> {
        Vec::new()
    }

    pub fn shutdown(&self) {}
}
