//! `axocoatl.yaml` validation: the documented coding agent, the starter config, and a table of
//! invalid configs whose exact diagnostics are snapshotted.

use std::path::{Path, PathBuf};

use axocoatl::config::{self, Diagnostic, OverflowPolicy, ProviderKind, Severity};

/// One fixture per rule or syntax failure, and what it shows.
const INVALID: &[(&str, &str)] = &[
    // YAML syntax
    (
        "syntax_bad_indentation",
        "a key indented less than its siblings",
    ),
    ("syntax_tab", "a tab in indentation"),
    ("syntax_unclosed_quote", "a quoted value that never ends"),
    ("syntax_unclosed_flow", "a `[` list that is never closed"),
    ("syntax_colon_in_value", "an unquoted value containing `: `"),
    ("syntax_duplicate_key", "a key given twice in one mapping"),
    ("syntax_empty", "an empty file"),
    ("syntax_comments_only", "a file with only comments"),
    ("syntax_not_a_mapping", "a top level that is a list"),
    ("syntax_two_documents", "a second YAML document"),
    // structure
    (
        "unknown_top_level_key",
        "unknown top-level key with did-you-mean",
    ),
    ("unknown_agent_key", "unknown agent key with did-you-mean"),
    ("misplaced_key", "a sampling key put directly on the agent"),
    (
        "unknown_keys_everywhere",
        "every unknown key reported at once",
    ),
    ("wrong_type_number", "text where a number belongs"),
    ("wrong_type_list", "a mapping where a list belongs"),
    ("wrong_type_negative", "a negative token count"),
    ("wrong_type_bool", "text where a boolean belongs"),
    (
        "wrong_type_each_agent",
        "one type error per agent, all reported",
    ),
    ("missing_required_key", "an agent without `provider`"),
    (
        "structure_and_rules_together",
        "type errors, unknown keys and broken references, all in one pass",
    ),
    ("unknown_enum_value", "a misspelled role with did-you-mean"),
    (
        "unknown_response_format",
        "a response_format that is not text or json",
    ),
    (
        "unknown_checkpoint_policy",
        "a misspelled checkpoint policy",
    ),
    // budgets and sampling
    (
        "budget_per_call_exceeds_per_execution",
        "per_call > per_execution",
    ),
    ("budget_not_positive", "zero budgets"),
    (
        "tool_unknown",
        "an allowlist naming unknown tools, with did-you-mean",
    ),
    (
        "tool_write_in_read_only",
        "write tools in read-only agents' allowlists, and max_steps 0",
    ),
    ("sandbox_unknown", "a misspelled sandbox mode"),
    (
        "command_limits_out_of_range",
        "command limits of 0 and too large, limits on a full-access agent",
    ),
    ("workspace_missing", "a workspace that does not exist"),
    ("sampling_temperature_negative", "temperature < 0"),
    ("sampling_top_p_out_of_range", "top_p of 0 and above 1"),
    ("sampling_max_tokens_zero", "max_tokens of 0"),
    ("max_tokens_exceeds_per_call", "max_tokens > per_call"),
    // ids and references
    ("duplicate_agent_id", "two agents with one id"),
    ("invalid_agent_id", "ids with `:`, a leading `-`, a space"),
    ("depends_on_unknown_agent", "depends_on names no agent"),
    ("dependency_cycle", "a three-agent dependency cycle, named"),
    ("self_dependency", "an agent depending on itself"),
    ("default_agent_unknown", "default_agent names no agent"),
    ("no_agents", "no agents at all"),
    // roles and workflows
    (
        "coordinator_without_workflow",
        "a coordinator leading no workflow",
    ),
    (
        "coordinator_two_workflows",
        "a coordinator leading two workflows (ambiguous)",
    ),
    (
        "worker_without_workflow",
        "a worker in no coordinator-led workflow",
    ),
    ("worker_as_default_agent", "a worker as default_agent"),
    (
        "worker_as_automation_target",
        "a worker as an automation's agent",
    ),
    (
        "workflow_unknown_agents",
        "workflow members and entry_point that name no agent",
    ),
    (
        "workflow_entry_point_not_coordinator",
        "a workflow led by an autonomous agent",
    ),
    (
        "workflow_member_not_worker",
        "a workflow listing an autonomous agent as worker",
    ),
    // providers
    (
        "provider_unknown",
        "a misspelled provider with did-you-mean",
    ),
    (
        "model_missing_ollama",
        "the ollama provider without a model",
    ),
    (
        "model_missing_openai_entry",
        "an openai-kind entry without a model",
    ),
    (
        "script_provider_without_script",
        "script providers without a script file",
    ),
    (
        "provider_field_for_other_kind",
        "local-only fields on an ollama entry",
    ),
    (
        "provider_api_key_in_config",
        "an API key where its variable name belongs (not echoed)",
    ),
    (
        "provider_bad_base_url_and_zero_timeout",
        "a base_url without scheme, a zero timeout",
    ),
    (
        "provider_local_too_many_threads",
        "a local provider asking for more threads than any machine's cores",
    ),
    ("provider_missing_kind", "a provider entry without kind"),
    // memory
    (
        "core_block_duplicate_label",
        "two core blocks with one label",
    ),
    ("core_block_zero_limit", "a core block with limit 0"),
    (
        "memory_out_of_range",
        "zero messages, zero top_k, min_score above 1",
    ),
    // automations
    ("cron_invalid", "cron expressions that do not parse"),
    (
        "automation_both_targets",
        "an automation with agent and workflow",
    ),
    (
        "automation_no_target",
        "an automation with neither agent nor workflow",
    ),
    (
        "automation_unknown_targets",
        "automation targets that do not exist",
    ),
    (
        "automation_empty_request_duplicate_id",
        "a blank request and a repeated id",
    ),
    (
        "automation_policy_values",
        "catch_up and overlap values that do not exist",
    ),
    (
        "automation_timezone_window",
        "unknown time zones (one close to a real name), a zero window, an hour of 25",
    ),
    (
        "automation_schedule_never_fires",
        "schedules that never fire (30 February, a past year), one firing every 2 s, catch_up_max_runs 0",
    ),
    // sessions and other sections
    (
        "session_name_invalid",
        "session names with a space and a leading `.`",
    ),
    (
        "consolidation_and_checkpoint_zero",
        "zero intervals and keep: 0",
    ),
    // all at once
    (
        "many_errors_at_once",
        "errors from every stage of one agent, plus a warning, together",
    ),
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn fixture(kind: &str, name: &str) -> PathBuf {
    root()
        .join("tests/fixtures/config")
        .join(kind)
        .join(format!("{name}.yaml"))
}

/// The diagnostics as `axocoatl validate` prints them, with the fixture path made relative.
fn render(diagnostics: &[Diagnostic]) -> String {
    let prefix = format!("{}/", root().display());
    diagnostics
        .iter()
        .map(|d| d.to_string().replace(&prefix, ""))
        .collect::<Vec<_>>()
        .join("\n")
}

fn snapshot_settings(description: &str) -> insta::Settings {
    let mut settings = crate::common::env::settings();
    settings.set_description(description);
    settings.set_omit_expression(true);
    settings
}

fn load_valid(name: &str) -> config::Loaded {
    match config::load(&fixture("valid", name)) {
        Ok(loaded) => loaded,
        Err(diagnostics) => panic!("{name} should be valid:\n{}", render(&diagnostics)),
    }
}

#[test]
fn seed_coder_config_validates() {
    let loaded = load_valid("seed_coder");
    assert!(loaded.warnings.is_empty(), "{}", render(&loaded.warnings));
    let config = &loaded.config;
    let coder = config.agent("coder").expect("coder is defined");
    assert_eq!(coder.depends_on, ["planner"]);
    assert_eq!(coder.model.as_deref(), Some("qwen2.5-coder:14b"));
    let budget = coder.token_budget.as_ref().expect("coder has a budget");
    assert_eq!(
        (budget.per_execution, budget.per_call),
        (Some(20000), Some(8192))
    );
    assert_eq!(budget.overflow_policy, OverflowPolicy::Abort);
    assert_eq!(coder.sampling.temperature, Some(0.0));
    assert_eq!(coder.sampling.max_tokens, Some(4096));
    assert!(coder
        .system_prompt
        .as_deref()
        .is_some_and(|p| p.starts_with("Work inside")));
    // No default_agent: the first autonomous agent.
    assert_eq!(
        config.default_agent().map(|a| a.id.as_str()),
        Some("planner")
    );
    let provider = config
        .resolve_provider(coder, &|_| None, loaded.config_dir())
        .expect("ollama resolves");
    assert_eq!(provider.base_url.as_deref(), Some("http://127.0.0.1:11434"));
}

/// The warnings other than "… is not supported yet" (configuration accepted but not run).
fn beyond_not_run_yet(warnings: &[Diagnostic]) -> Vec<Diagnostic> {
    warnings
        .iter()
        .filter(|w| !w.message.contains("not supported yet"))
        .cloned()
        .collect()
}

#[test]
fn full_config_validates() {
    let loaded = load_valid("full");
    let others = beyond_not_run_yet(&loaded.warnings);
    assert!(others.is_empty(), "{}", render(&others));
    let said = |what: &str| loaded.warnings.iter().any(|w| w.message.contains(what));
    assert!(
        !said("workflows are not supported yet") && !said("consolidation"),
        "workflows run; the consolidation loop runs under serve: {}",
        render(&loaded.warnings)
    );
    let config = &loaded.config;
    assert_eq!(config.agents.len(), 5);
    assert_eq!(
        config.workflows[0].workers,
        ["researcher", "writer.v2"],
        "`members` is an alias"
    );
    assert_eq!(
        config.agent("researcher").and_then(|a| a.model.as_deref()),
        Some("3.10")
    );
    assert_eq!(config.automations.len(), 2);
    assert!(!config.automations[1].enabled);
    let brief = &config.automations[0];
    assert_eq!(brief.timezone.as_deref(), Some("Europe/Berlin"));
    assert_eq!(
        (brief.catch_up, brief.catch_up_window_secs, brief.overlap),
        (config::CatchUp::All, 7200, config::Overlap::Queue)
    );
    let weekly = &config.automations[1];
    assert_eq!(
        (weekly.catch_up, weekly.catch_up_window_secs, weekly.overlap),
        (config::CatchUp::Latest, 86_400, config::Overlap::Skip),
        "the defaults"
    );
    assert_eq!(config.checkpoint.keep, 5);
    assert_eq!(config.default_session.as_deref(), Some("main_1.0"));
    let replay = config.agent("replay").expect("replay is defined");
    let provider = config
        .resolve_provider(replay, &|_| None, Path::new("/srv/project"))
        .expect("script resolves");
    assert_eq!(
        provider.script,
        Some(PathBuf::from("/srv/project/replies.yaml"))
    );
}

#[test]
fn agents_that_act_config_validates() {
    use axocoatl::config::SandboxMode;
    let loaded = load_valid("agents_that_act");
    assert!(loaded.warnings.is_empty(), "{}", render(&loaded.warnings));
    let config = &loaded.config;
    assert_eq!(config.workspace.as_deref(), Some(Path::new(".")));
    let coder = config.agent("coder").expect("coder");
    assert_eq!(
        (coder.sandbox, coder.max_steps()),
        (SandboxMode::WorkspaceWrite, 25)
    );
    let reviewer = config.agent("reviewer").expect("reviewer");
    assert_eq!(
        (reviewer.sandbox, reviewer.max_steps()),
        (SandboxMode::ReadOnly, 25)
    );
    assert_eq!(reviewer.tools, ["read_file", "grep", "run_command"]);
}

#[test]
fn full_access_is_accepted_with_a_warning() {
    let loaded = load_valid("sandbox_full_access");
    assert_eq!(loaded.warnings.len(), 1);
    snapshot_settings("sandbox: full-access is accepted with a warning").bind(|| {
        insta::assert_snapshot!(
            format!("config_validate__{}", "valid_sandbox_full_access"),
            render(&loaded.warnings)
        )
    });
}

#[test]
fn deprecated_summarize_is_warn_with_a_warning() {
    let loaded = load_valid("deprecated_summarize");
    let budget = loaded.config.agents[0]
        .token_budget
        .as_ref()
        .expect("budget");
    assert_eq!(budget.overflow_policy.effective(), OverflowPolicy::Warn);
    assert_eq!(loaded.warnings.len(), 1);
    assert_eq!(loaded.warnings[0].severity, Severity::Warning);
    snapshot_settings("overflow_policy: summarize is accepted with a deprecation warning").bind(
        || {
            insta::assert_snapshot!(
                format!("config_validate__{}", "valid_deprecated_summarize"),
                render(&loaded.warnings)
            )
        },
    );
}

#[test]
fn a_budget_no_call_can_fit_is_a_warning_with_the_estimate() {
    let loaded = load_valid("budget_never_met");
    let agents: Vec<&str> = loaded
        .warnings
        .iter()
        .map(|w| w.message.split('`').nth(1).unwrap_or(""))
        .collect();
    assert_eq!(agents, ["coder", "lean"], "{}", render(&loaded.warnings));
    snapshot_settings("budgets below what every call reserves are accepted with a warning").bind(
        || {
            insta::assert_snapshot!(
                format!("config_validate__{}", "valid_budget_never_met"),
                render(&loaded.warnings)
            )
        },
    );
}

#[test]
fn invalid_configs_report_every_error_with_its_position() {
    assert!(INVALID.len() >= 30);
    for (name, rule) in INVALID {
        let path = fixture("invalid", name);
        let diagnostics = match config::load(&path) {
            Ok(_) => panic!("{name} ({rule}) should be rejected"),
            Err(diagnostics) => diagnostics,
        };
        assert!(
            diagnostics.iter().any(Diagnostic::is_error),
            "{name}: no error"
        );
        for d in &diagnostics {
            assert!(d.line >= 1 && d.column >= 1, "{name}: {d}");
            assert!(
                d.hint.is_some(),
                "{name}: every diagnostic says what to do: {d}"
            );
        }
        snapshot_settings(rule).bind(|| {
            insta::assert_snapshot!(
                format!("config_validate__{}", format!("invalid_{name}")),
                render(&diagnostics)
            )
        });
    }
}

/// The real binary reports a structural error and the rules' errors at once: a misspelt
/// provider or `default_agent` is not held back until a type error elsewhere is fixed.
#[test]
fn validate_reports_structure_and_rules_in_one_pass() {
    let env = crate::common::env::TestEnv::new();
    let file = fixture("invalid", "structure_and_rules_together");
    let r = env.run(&["validate", &file.display().to_string(), "--json"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let messages: Vec<String> = r
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["message"].as_str().map(str::to_owned))
        .collect();
    let has = |part: &str| messages.iter().any(|m| m.contains(part));
    assert!(has("max_steps"), "{messages:#?}");
    assert!(has("provider `olama`"), "{messages:#?}");
    assert!(has("modle"), "{messages:#?}");
    assert!(has("`writter`"), "{messages:#?}");
    // What a structural error explains is left out: the agent with `modle` is not also
    // said to need a model.
    assert!(!has("needs a `model`"), "{messages:#?}");
    assert_eq!(messages.len(), 4, "{messages:#?}");
}

#[test]
fn every_invalid_fixture_is_in_the_table() {
    let dir = root().join("tests/fixtures/config/invalid");
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .expect("fixture dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| p.file_stem().expect("stem").to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = INVALID.iter().map(|(name, _)| name.to_string()).collect();
    listed.sort();
    assert_eq!(on_disk, listed);
}

#[test]
fn a_missing_file_is_one_clear_error() {
    let path = root().join("tests/fixtures/config/does-not-exist.yaml");
    let diagnostics = config::load(&path).expect_err("missing");
    snapshot_settings("a configuration file that does not exist").bind(|| {
        insta::assert_snapshot!(
            format!("config_validate__{}", "missing_file"),
            render(&diagnostics)
        )
    });
}

#[test]
fn a_secret_in_api_key_env_is_never_echoed() {
    let diagnostics =
        config::load(&fixture("invalid", "provider_api_key_in_config")).expect_err("invalid");
    assert!(!render(&diagnostics).contains("abc123secret"));
}

/// The full reference of `docs/config.md`: its one YAML block.
fn reference_config() -> String {
    let text = std::fs::read_to_string(root().join("docs/config.md")).expect("docs/config.md");
    let start = text.find("```yaml\n").expect("a yaml block") + "```yaml\n".len();
    let end = start + text[start..].find("```").expect("its end");
    text[start..end].to_owned()
}

/// `##` lines explain; `# ` lines are examples: `text` with every example switched on.
fn uncommented(text: &str) -> String {
    text.lines()
        .map(|line| {
            let trimmed = line.trim_start();
            let indent = &line[..line.len() - trimmed.len()];
            match trimmed.strip_prefix("# ") {
                Some(rest) => format!("{indent}{rest}\n"),
                None => format!("{line}\n"),
            }
        })
        .collect()
}

#[test]
fn the_starter_config_is_short_valid_and_opens_with_the_switch_to_a_server() {
    let text = config::starter_config();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() <= 60, "{} lines", lines.len());
    // The first three lines say how to use Ollama or an OpenAI key.
    let opening = lines[..3].join("\n");
    for needed in [
        "provider: ollama",
        "provider: openai",
        "OPENAI_API_KEY",
        "-m ollama:",
    ] {
        assert!(
            opening.contains(needed),
            "{needed} missing from:\n{opening}"
        );
    }
    let loaded = match config::load_str(Path::new("axocoatl.yaml"), text) {
        Ok(loaded) => loaded,
        Err(diagnostics) => panic!("starter config is invalid:\n{}", render(&diagnostics)),
    };
    assert!(loaded.warnings.is_empty(), "{}", render(&loaded.warnings));
    let config = &loaded.config;
    let agent = config.default_agent().expect("a default agent");
    assert_eq!(agent.id, "assistant");
    let provider = config
        .resolve_provider(agent, &|_| None, Path::new("."))
        .expect("resolves");
    assert_eq!(provider.kind, ProviderKind::Local);
    // Its examples (past the opening prose) are valid too.
    let rest: String = lines[3..].iter().map(|l| format!("{l}\n")).collect();
    match config::load_str(Path::new("uncommented.yaml"), &uncommented(&rest)) {
        Ok(loaded) => assert!(loaded.warnings.is_empty(), "{}", render(&loaded.warnings)),
        Err(diagnostics) => panic!("{}", render(&diagnostics)),
    }
}

#[test]
fn the_reference_documents_every_section_field_and_kind() {
    let text = reference_config();
    let loaded = match config::load_str(Path::new("axocoatl.yaml"), &text) {
        Ok(loaded) => loaded,
        Err(diagnostics) => panic!("docs/config.md is invalid:\n{}", render(&diagnostics)),
    };
    assert!(loaded.warnings.is_empty(), "{}", render(&loaded.warnings));
    let config = &loaded.config;

    // Every top-level section of the schema is shown, live or as a commented example.
    let sections = serde_json::to_value(config::Config::default()).expect("serializes");
    for section in sections.as_object().expect("a mapping").keys() {
        assert!(
            text.contains(&format!("\n{section}:")) || text.contains(&format!("\n# {section}:")),
            "docs/config.md lacks `{section}:`"
        );
    }
    // ... and every agent field.
    let agent = serde_json::to_value(&config.agents[0]).expect("serializes");
    for field in agent.as_object().expect("a mapping").keys() {
        assert!(
            text.contains(&format!("{field}:")),
            "docs/config.md does not document agent field `{field}`"
        );
    }
    for kind in ["ollama", "openai", "anthropic", "local", "script"] {
        assert!(
            text.contains(&format!("kind: {kind}")),
            "docs/config.md lacks a `kind: {kind}` example"
        );
    }
}

#[test]
fn the_reference_examples_validate_when_uncommented() {
    // With every example switched on, the reference must still be valid.
    let uncommented = uncommented(&reference_config());
    for section in [
        "providers:",
        "workflows:",
        "automations:",
        "default_session:",
    ] {
        assert!(
            uncommented.contains(&format!("\n{section}")),
            "{section} has no example"
        );
    }
    match config::load_str(Path::new("uncommented.yaml"), &uncommented) {
        Ok(loaded) => {
            let others = beyond_not_run_yet(&loaded.warnings);
            assert!(others.is_empty(), "{}", render(&others));
        }
        Err(diagnostics) => panic!("{}\n---\n{uncommented}", render(&diagnostics)),
    }
}

#[test]
fn diagnostics_display_and_serialize() {
    let d = Diagnostic {
        severity: Severity::Error,
        file: PathBuf::from("axocoatl.yaml"),
        line: 3,
        column: 5,
        message: "unknown key `modle`".into(),
        hint: Some("did you mean `model`?".into()),
    };
    assert_eq!(
        d.to_string(),
        "axocoatl.yaml:3:5: error: unknown key `modle`\n  hint: did you mean `model`?"
    );
    let json = serde_json::to_string(&d).expect("serializes");
    assert_eq!(
        json,
        r#"{"severity":"error","file":"axocoatl.yaml","line":3,"column":5,"message":"unknown key `modle`","hint":"did you mean `model`?"}"#
    );
    let warning = Diagnostic {
        severity: Severity::Warning,
        hint: None,
        ..d
    };
    assert_eq!(
        warning.to_string(),
        "axocoatl.yaml:3:5: warning: unknown key `modle`"
    );
}

#[test]
fn session_names_and_schedules() {
    for ok in ["main", "a.b-c_d", "Q3", "x."] {
        assert!(config::check_name(ok).is_ok(), "{ok}");
    }
    for bad in ["", ".hidden", "-x", "a:b", "a b", "ü"] {
        assert!(config::check_name(bad).is_err(), "{bad}");
    }
    for ok in ["0 9 * * 1-5", "*/10 * * * * *", "@daily"] {
        assert!(config::parse_schedule(ok).is_ok(), "{ok}");
    }
    assert!(config::parse_schedule("61 * * * *").is_err());
}

#[test]
fn truncated_and_mangled_configs_never_panic() {
    // Every prefix of every fixture, and each with one character replaced by YAML
    // punctuation, must give diagnostics or a config, never a panic.
    let mut texts = vec![config::starter_config().to_string(), reference_config()];
    for kind in ["valid", "invalid"] {
        for entry in
            std::fs::read_dir(root().join("tests/fixtures/config").join(kind)).expect("dir")
        {
            texts.push(std::fs::read_to_string(entry.expect("entry").path()).expect("fixture"));
        }
    }
    let mut runs = 0;
    for text in &texts {
        let boundaries: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
        for (n, &cut) in boundaries.iter().enumerate() {
            let _ = config::load_str(Path::new("t.yaml"), &text[..cut]);
            let replacement = [
                "\t", ":", "-", "[", "{", "\"", "'", "&a", "*a", "#", "\n", "  ",
            ][n % 12];
            let next = boundaries.get(n + 1).copied().unwrap_or(text.len());
            let mangled = format!("{}{replacement}{}", &text[..cut], &text[next..]);
            let _ = config::load_str(Path::new("t.yaml"), &mangled);
            runs += 2;
        }
    }
    assert!(runs > 10_000, "{runs}");
}
