//! HTN decomposition of a coordinator's turn into subtasks.
//!
//! Methods are tried in order: the model's plan (JSON of [`schema`], checked by
//! [`validate`]; once more after a repair round that shows the model its errors), then
//! [`fallback`]. Which one produced the plan is its [`Method`], recorded with the plan.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::config::{AgentConfig, Config, WorkflowConfig};

/// The `worker` of a subtask done by an ad-hoc worker (which needs a `role`).
pub const ADHOC: &str = "adhoc";

/// The most subtasks a plan may have.
pub const MAX_SUBTASKS: usize = 12;

/// The longest subtask id.
const MAX_ID: usize = 40;

/// One unit of a plan: done by one worker, after the subtasks it depends on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subtask {
    pub id: String,
    /// A declared worker of the workflow, or [`ADHOC`].
    pub worker: String,
    /// What an ad-hoc worker is (its system prompt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    pub task: String,
    #[serde(default)]
    pub depends_on: Vec<String>,
}

impl Subtask {
    pub fn is_adhoc(&self) -> bool {
        self.worker == ADHOC
    }
}

/// Which decomposition method produced a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// The model's plan, valid as first proposed.
    Model,
    /// The model's plan, valid after the repair round.
    ModelRepaired,
    /// One subtask per declared worker, each given the request.
    Fallback,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Model => "model",
            Method::ModelRepaired => "model-repaired",
            Method::Fallback => "fallback",
        }
    }
}

/// The workflow a coordinator leads, and its declared workers in the order it lists them.
pub fn workflow_of<'c>(
    config: &'c Config,
    coordinator: &str,
) -> Option<(&'c WorkflowConfig, Vec<&'c AgentConfig>)> {
    let flow = config
        .workflows
        .iter()
        .find(|w| w.entry_point == coordinator)?;
    let workers = flow
        .workers
        .iter()
        .filter_map(|w| config.agent(w))
        .collect();
    Some((flow, workers))
}

/// The JSON schema of a plan, as the model is shown it.
pub fn schema() -> Value {
    json!({
        "type": "object",
        "required": ["subtasks"],
        "properties": {
            "subtasks": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_SUBTASKS,
                "items": {
                    "type": "object",
                    "required": ["id", "worker", "task", "depends_on"],
                    "properties": {
                        "id": {"type": "string", "description": "short unique id, letters, digits, - and _"},
                        "worker": {"type": "string", "description": "a declared worker's id, or \"adhoc\""},
                        "role": {"type": "string", "description": "for \"adhoc\" only: what that worker is"},
                        "task": {"type": "string", "description": "what this worker must do"},
                        "depends_on": {"type": "array", "items": {"type": "string"}, "description": "ids of subtasks whose results it needs"}
                    }
                }
            }
        }
    })
}

/// The planning instructions appended to the coordinator's system prompt for its plan call.
pub fn instructions(workers: &[&AgentConfig]) -> String {
    let mut text = String::from(
        "You coordinate a team. Decompose the user's request into subtasks for your workers. \
         Independent subtasks run in parallel; a subtask receives the results of the subtasks \
         it depends on. Reply with JSON only, an object matching this schema:\n",
    );
    text.push_str(&schema().to_string());
    text.push_str("\nYour workers:\n");
    for w in workers {
        let about = w
            .system_prompt
            .as_deref()
            .or(w.name.as_deref())
            .unwrap_or("")
            .lines()
            .next()
            .unwrap_or("");
        text.push_str(&format!("- {}: {about}\n", w.id));
    }
    text.push_str(&format!(
        "- {ADHOC}: a worker made for one subtask; give its `role`.\n"
    ));
    text
}

/// What the model is told after a plan it proposed was invalid.
pub fn repair_request(errors: &[String]) -> String {
    format!(
        "That plan is invalid:\n- {}\nReply with a corrected plan, JSON only, matching the schema.",
        errors.join("\n- ")
    )
}

/// Parses and validates the model's reply. `Err` lists every problem, for the repair round.
pub fn parse(text: &str, workers: &[&str]) -> Result<Vec<Subtask>, Vec<String>> {
    let body = strip_fence(text.trim());
    #[derive(Deserialize)]
    struct Reply {
        subtasks: Vec<Subtask>,
    }
    let reply: Reply = serde_json::from_str(body).map_err(|e| {
        vec![format!(
            "the reply is not a JSON object with a `subtasks` array of {{id, worker, task, depends_on}}: {e}"
        )]
    })?;
    let errors = validate(&reply.subtasks, workers);
    if errors.is_empty() {
        Ok(reply.subtasks)
    } else {
        Err(errors)
    }
}

/// A reply wrapped in a Markdown code fence, unwrapped.
fn strip_fence(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    let rest = rest.split_once('\n').map(|(_, r)| r).unwrap_or("");
    rest.trim_end().strip_suffix("```").unwrap_or(rest).trim()
}

/// Every problem of a plan: no subtasks or too many, bad or repeated ids, unknown workers, an
/// ad-hoc worker without a role, empty tasks, unknown dependencies and cycles.
pub fn validate(subtasks: &[Subtask], workers: &[&str]) -> Vec<String> {
    let mut errors = Vec::new();
    if subtasks.is_empty() {
        errors.push("the plan has no subtasks".to_owned());
    }
    if subtasks.len() > MAX_SUBTASKS {
        errors.push(format!(
            "the plan has {} subtasks; at most {MAX_SUBTASKS} are allowed",
            subtasks.len()
        ));
    }
    let mut seen = BTreeSet::new();
    for s in subtasks {
        let id = &s.id;
        let id_ok = !id.is_empty()
            && id.len() <= MAX_ID
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !id_ok {
            errors.push(format!(
                "subtask id {id:?} must be 1-{MAX_ID} letters, digits, `-` or `_`"
            ));
        }
        if !seen.insert(id.as_str()) {
            errors.push(format!("subtask id `{id}` is used twice"));
        }
        if s.is_adhoc() {
            if s.role.as_deref().is_none_or(|r| r.trim().is_empty()) {
                errors.push(format!(
                    "subtask `{id}`: an `{ADHOC}` worker needs a `role`"
                ));
            }
        } else if !workers.contains(&s.worker.as_str()) {
            errors.push(format!(
                "subtask `{id}`: `{}` is not a worker of this workflow (workers: {}; or `{ADHOC}` with a `role`)",
                s.worker,
                workers.join(", ")
            ));
        }
        if s.task.trim().is_empty() {
            errors.push(format!("subtask `{id}` has an empty task"));
        }
    }
    for s in subtasks {
        for d in &s.depends_on {
            if d == &s.id {
                errors.push(format!("subtask `{}` depends on itself", s.id));
            } else if !seen.contains(d.as_str()) {
                errors.push(format!(
                    "subtask `{}` depends on `{d}`, which is not a subtask of the plan",
                    s.id
                ));
            }
        }
    }
    if errors.is_empty() {
        if let Some(cycle) = cycle(subtasks) {
            errors.push(format!(
                "the dependencies form a cycle: {}",
                cycle.join(" -> ")
            ));
        }
    }
    errors
}

/// A dependency cycle, if the subtasks have one (ids in order, the first repeated last).
fn cycle(subtasks: &[Subtask]) -> Option<Vec<String>> {
    let deps: BTreeMap<&str, &[String]> = subtasks
        .iter()
        .map(|s| (s.id.as_str(), s.depends_on.as_slice()))
        .collect();
    // 0 unvisited, 1 on the path, 2 done.
    let mut mark: BTreeMap<&str, u8> = BTreeMap::new();
    fn walk<'a>(
        at: &'a str,
        deps: &BTreeMap<&'a str, &'a [String]>,
        mark: &mut BTreeMap<&'a str, u8>,
        path: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        match mark.get(at) {
            Some(2) => return None,
            Some(1) => {
                let from = path.iter().position(|p| *p == at).unwrap_or(0);
                let mut c: Vec<String> = path[from..].iter().map(|s| s.to_string()).collect();
                c.push(at.to_owned());
                return Some(c);
            }
            _ => {}
        }
        mark.insert(at, 1);
        path.push(at);
        for d in deps.get(at).copied().unwrap_or(&[]) {
            if let Some(c) = walk(d, deps, mark, path) {
                return Some(c);
            }
        }
        path.pop();
        mark.insert(at, 2);
        None
    }
    for s in subtasks {
        if let Some(c) = walk(&s.id, &deps, &mut mark, &mut Vec::new()) {
            return Some(c);
        }
    }
    None
}

/// The fallback method: one subtask per declared worker (id: the worker's id), each given
/// the request, depending on the workers its `depends_on` names within the workflow, in
/// dependency order (listing order among equals).
pub fn fallback(workers: &[&AgentConfig], request: &str) -> Vec<Subtask> {
    let ids: Vec<&str> = workers.iter().map(|w| w.id.as_str()).collect();
    let subtasks: Vec<Subtask> = workers
        .iter()
        .map(|w| Subtask {
            id: w.id.clone(),
            worker: w.id.clone(),
            role: None,
            task: request.to_owned(),
            depends_on: w
                .depends_on
                .iter()
                .filter(|d| ids.contains(&d.as_str()) && **d != w.id)
                .cloned()
                .collect(),
        })
        .collect();
    order(subtasks)
}

/// The subtasks in dependency order (a stable topological sort; a cycle, which validation
/// rules out, keeps the rest in listing order at the end).
pub fn order(subtasks: Vec<Subtask>) -> Vec<Subtask> {
    let mut left = subtasks;
    let mut out: Vec<Subtask> = Vec::with_capacity(left.len());
    while !left.is_empty() {
        let ready = left
            .iter()
            .position(|s| s.depends_on.iter().all(|d| out.iter().any(|o| &o.id == d)));
        match ready {
            Some(i) => out.push(left.remove(i)),
            None => {
                out.append(&mut left);
            }
        }
    }
    out
}

/// Where a pass stands: which subtasks are done, running or not started.
#[derive(Clone, Debug)]
pub struct Progress {
    pub subtasks: Vec<Subtask>,
    pub state: Vec<Step>,
}

/// A subtask's place in the pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Pending,
    Running,
    Done,
    /// Failed or stopped: what depends on it never starts.
    Ended,
}

impl Progress {
    pub fn new(subtasks: Vec<Subtask>) -> Progress {
        let state = vec![Step::Pending; subtasks.len()];
        Progress { subtasks, state }
    }

    fn done(&self, id: &str) -> bool {
        self.subtasks
            .iter()
            .zip(&self.state)
            .any(|(s, st)| s.id == id && *st == Step::Done)
    }

    /// Pending subtasks whose dependencies are all done, in plan order.
    pub fn ready(&self) -> Vec<usize> {
        (0..self.subtasks.len())
            .filter(|&i| self.state[i] == Step::Pending)
            .filter(|&i| self.subtasks[i].depends_on.iter().all(|d| self.done(d)))
            .collect()
    }

    pub fn running(&self) -> usize {
        self.state.iter().filter(|s| **s == Step::Running).count()
    }

    pub fn all_done(&self) -> bool {
        self.state.iter().all(|s| *s == Step::Done)
    }

    pub fn index(&self, id: &str) -> Option<usize> {
        self.subtasks.iter().position(|s| s.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(id: &str, worker: &str, deps: &[&str]) -> Subtask {
        Subtask {
            id: id.into(),
            worker: worker.into(),
            role: None,
            task: format!("do {id}"),
            depends_on: deps.iter().map(|d| d.to_string()).collect(),
        }
    }

    #[test]
    fn a_valid_plan_parses_also_inside_a_code_fence() {
        let text = r#"{"subtasks":[{"id":"a","worker":"w1","task":"t","depends_on":[]},{"id":"b","worker":"adhoc","role":"critic","task":"t","depends_on":["a"]}]}"#;
        let plan = parse(text, &["w1"]).expect("valid");
        assert_eq!(plan.len(), 2);
        assert!(plan[1].is_adhoc());
        let fenced = format!("```json\n{text}\n```");
        assert_eq!(parse(&fenced, &["w1"]).expect("valid"), plan);
    }

    #[test]
    fn every_problem_is_listed() {
        let mut adhoc = sub("c", ADHOC, &[]);
        adhoc.role = Some(" ".into());
        let plan = vec![
            sub("a", "ghost", &["zz"]),
            sub("a", "w1", &[]),
            adhoc,
            sub("bad id!", "w1", &["bad id!"]),
        ];
        let errors = validate(&plan, &["w1"]);
        let all = errors.join("\n");
        for needle in [
            "`ghost` is not a worker",
            "`a` is used twice",
            "needs a `role`",
            "depends on `zz`",
            "must be 1-40 letters",
            "depends on itself",
        ] {
            assert!(all.contains(needle), "{needle} in {all}");
        }
        assert_eq!(
            validate(&[], &["w1"]),
            vec!["the plan has no subtasks".to_owned()]
        );
        let many: Vec<Subtask> = (0..=MAX_SUBTASKS)
            .map(|i| sub(&format!("s{i}"), "w1", &[]))
            .collect();
        assert!(validate(&many, &["w1"])[0].contains("at most 12"));
    }

    #[test]
    fn cycles_are_rejected_with_their_path() {
        let plan = vec![
            sub("a", "w", &["c"]),
            sub("b", "w", &["a"]),
            sub("c", "w", &["b"]),
        ];
        let errors = validate(&plan, &["w"]);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("a -> c -> b -> a"), "{errors:?}");
        assert!(parse("not json", &["w"]).expect_err("not json")[0].contains("not a JSON object"));
    }

    #[test]
    fn the_fallback_orders_declared_workers_by_depends_on() {
        let mk = |id: &str, deps: &[&str]| -> AgentConfig {
            serde_json::from_value(
                json!({"id": id, "provider": "p", "role": "worker", "depends_on": deps}),
            )
            .expect("agent")
        };
        let (w, r, x) = (
            mk("writer", &["researcher", "elsewhere"]),
            mk("researcher", &[]),
            mk("x", &[]),
        );
        let plan = fallback(&[&w, &r, &x], "the request");
        let ids: Vec<&str> = plan.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["researcher", "writer", "x"]);
        assert_eq!(plan[1].depends_on, ["researcher"]);
        assert!(plan.iter().all(|s| s.task == "the request"));
        assert!(validate(&plan, &["writer", "researcher", "x"]).is_empty());
    }

    #[test]
    fn progress_releases_dependents_only_after_their_dependencies() {
        let mut p = Progress::new(vec![
            sub("a", "w", &[]),
            sub("b", "w", &[]),
            sub("c", "w", &["a", "b"]),
        ]);
        assert_eq!(p.ready(), [0, 1]);
        p.state[0] = Step::Running;
        p.state[1] = Step::Done;
        assert_eq!(p.ready(), Vec::<usize>::new());
        p.state[0] = Step::Done;
        assert_eq!(p.ready(), [2]);
        p.state[2] = Step::Done;
        assert!(p.all_done());
    }
}
