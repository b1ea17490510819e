//! Rules about how agents, workflows and automations refer to each other: references
//! exist, dependencies have no cycle, and coordinators, workers and their workflows fit.

use std::collections::{BTreeSet, HashMap};

use super::diag::suggestion;
use super::types::{AgentRole, Config, WorkflowConfig};
use super::validate::{at, check_name, parse_schedule, schedule_checks, Checker};

pub(crate) fn check(c: &mut Checker<'_>, config: &Config) {
    let ids: HashMap<&str, usize> = config
        .agents
        .iter()
        .enumerate()
        .rev() // the first of duplicate ids wins, as in `Config::agent`
        .map(|(i, a)| (a.id.as_str(), i))
        .collect();
    let agent_ids = || config.agents.iter().map(|a| a.id.as_str());

    for (i, agent) in config.agents.iter().enumerate() {
        for (j, dep) in agent.depends_on.iter().enumerate() {
            if !ids.contains_key(dep.as_str()) {
                c.error(
                    c.value(at!["agents", i, "depends_on", j]),
                    format!(
                        "agent `{}` depends on `{dep}`, which is not a defined agent",
                        agent.id
                    ),
                    suggestion(dep, agent_ids(), "agents"),
                );
            }
        }
    }
    cycles(c, config, &ids);
    workflows(c, config, &ids);
    automations(c, config, &ids);

    if let Some(default) = &config.default_agent {
        let pos = c.value(at!["default_agent"]);
        match ids.get(default.as_str()).map(|&i| config.agents[i].role) {
            None => c.error(
                pos,
                format!("default_agent `{default}` is not a defined agent"),
                suggestion(default, agent_ids(), "agents"),
            ),
            Some(AgentRole::Worker) => c.error(
                pos,
                format!("default_agent `{default}` is a worker; workers run only inside their coordinator's workflow"),
                "choose an autonomous agent or a coordinator",
            ),
            Some(_) => {}
        }
    }
}

/// Reports each dependency cycle once, at the `depends_on` entry of its first agent.
fn cycles(c: &mut Checker<'_>, config: &Config, ids: &HashMap<&str, usize>) {
    let edges: Vec<Vec<(usize, usize)>> = config
        .agents
        .iter()
        .map(|a| {
            a.depends_on
                .iter()
                .enumerate()
                .filter_map(|(j, dep)| ids.get(dep.as_str()).map(|&to| (j, to)))
                .collect()
        })
        .collect();
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let mut marks = vec![Mark::New; edges.len()];
    let mut found: BTreeSet<Vec<usize>> = BTreeSet::new();
    for start in 0..edges.len() {
        if marks[start] != Mark::New {
            continue;
        }
        // Iterative depth-first search; `stack` holds the current path and the next edge of each.
        let mut stack = vec![(start, 0usize)];
        marks[start] = Mark::Open;
        while let Some(top) = stack.last_mut() {
            let node = top.0;
            let Some(&(_, to)) = edges[node].get(top.1) else {
                marks[node] = Mark::Done;
                stack.pop();
                continue;
            };
            top.1 += 1;
            match marks[to] {
                Mark::New => {
                    marks[to] = Mark::Open;
                    stack.push((to, 0));
                }
                Mark::Open => {
                    let from = stack.iter().position(|&(n, _)| n == to).unwrap_or(0);
                    let mut cycle: Vec<usize> = stack[from..].iter().map(|&(n, _)| n).collect();
                    let min = cycle
                        .iter()
                        .enumerate()
                        .min_by_key(|&(_, n)| *n)
                        .map_or(0, |(k, _)| k);
                    cycle.rotate_left(min);
                    found.insert(cycle);
                }
                Mark::Done => {}
            }
        }
    }
    for cycle in found {
        let (first, second) = (cycle[0], cycle.get(1).copied().unwrap_or(cycle[0]));
        let j = edges[first]
            .iter()
            .find(|&&(_, to)| to == second)
            .map_or(0, |&(j, _)| j);
        let mut names: Vec<&str> = cycle
            .iter()
            .map(|&n| config.agents[n].id.as_str())
            .collect();
        names.push(names[0]);
        c.error(
            c.value(at!["agents", first, "depends_on", j]),
            format!("dependency cycle: {}", names.join(" -> ")),
            "remove one of these `depends_on` entries so the dependencies form no loop",
        );
    }
}

fn workflows(c: &mut Checker<'_>, config: &Config, ids: &HashMap<&str, usize>) {
    c.unique(
        "workflow",
        "workflows",
        config.workflows.iter().map(|w| w.id.as_str()),
    );
    let agent_ids = || config.agents.iter().map(|a| a.id.as_str());
    // The coordinator of each workflow, first workflow first.
    let mut led_by: HashMap<&str, usize> = HashMap::new();
    for (w, flow) in config.workflows.iter().enumerate() {
        c.name(c.value(at!["workflows", w, "id"]), "workflow id", &flow.id);
        let entry_pos = c.value(at!["workflows", w, "entry_point"]);
        match ids.get(flow.entry_point.as_str()).map(|&i| config.agents[i].role) {
            None => c.error(
                entry_pos,
                format!("workflow `{}`: entry_point `{}` is not a defined agent", flow.id, flow.entry_point),
                suggestion(&flow.entry_point, agent_ids(), "agents"),
            ),
            Some(AgentRole::Coordinator) => {
                if let Some(&first) = led_by.get(flow.entry_point.as_str()) {
                    c.error(
                        entry_pos,
                        format!(
                            "coordinator `{}` is already the entry_point of workflow `{}` (line {}); its workers and plan would be ambiguous",
                            flow.entry_point,
                            config.workflows[first].id,
                            c.value(at!["workflows", first]).line
                        ),
                        "give a coordinator exactly one workflow: merge the two, or use another coordinator",
                    );
                } else {
                    led_by.insert(flow.entry_point.as_str(), w);
                }
            }
            Some(role) => c.error(
                entry_pos,
                format!(
                    "workflow `{}`: entry_point `{}` has role {}, but a workflow is led by a coordinator",
                    flow.id,
                    flow.entry_point,
                    role_name(role)
                ),
                format!("set `role: coordinator` on agent `{}`, or choose a coordinator", flow.entry_point),
            ),
        }
        if flow.max_parallel == Some(0) {
            c.error(
                c.value(at!["workflows", w, "max_parallel"]),
                format!(
                    "workflow `{}`: max_parallel is 0, so no subtask could run",
                    flow.id
                ),
                "give how many subtasks may run at once (default 4), at least 1",
            );
        }
        workers(c, config, ids, w, flow);
    }
    roles_in_workflows(c, config, &led_by);
}

/// The workers of workflow `w`: each listed once, each a defined agent of role worker.
fn workers(
    c: &mut Checker<'_>,
    config: &Config,
    ids: &HashMap<&str, usize>,
    w: usize,
    flow: &WorkflowConfig,
) {
    let agent_ids = || config.agents.iter().map(|a| a.id.as_str());
    let list = if c.has(at!["workflows", w, "members"]) {
        "members"
    } else {
        "workers"
    };
    for (j, worker) in flow.workers.iter().enumerate() {
        let pos = c.value(at!["workflows", w, list, j]);
        if flow.workers[..j].contains(worker) {
            c.error(
                pos,
                format!("workflow `{}` lists `{worker}` twice", flow.id),
                "list each worker once",
            );
            continue;
        }
        match ids.get(worker.as_str()).map(|&i| config.agents[i].role) {
            None => c.error(
                pos,
                format!(
                    "workflow `{}`: worker `{worker}` is not a defined agent",
                    flow.id
                ),
                suggestion(worker, agent_ids(), "agents"),
            ),
            Some(AgentRole::Worker) => {}
            Some(role) => c.error(
                pos,
                format!(
                    "workflow `{}` lists `{worker}` as a worker, but its role is {}",
                    flow.id,
                    role_name(role)
                ),
                format!("set `role: worker` on agent `{worker}`, or remove it from this workflow"),
            ),
        }
    }
}

/// Every coordinator leads a workflow, and every worker belongs to one.
fn roles_in_workflows(c: &mut Checker<'_>, config: &Config, led_by: &HashMap<&str, usize>) {
    for (i, agent) in config.agents.iter().enumerate() {
        let role_pos = c.value(at!["agents", i, "role"]);
        match agent.role {
            AgentRole::Coordinator if !led_by.contains_key(agent.id.as_str()) => c.error(
                role_pos,
                format!("coordinator `{}` is not the entry_point of any workflow", agent.id),
                format!("add a workflow with `entry_point: {}` and its `workers:`, or change its role", agent.id),
            ),
            AgentRole::Worker if !config.workflows.iter().any(|f| f.workers.contains(&agent.id)) => c.error(
                role_pos,
                format!("worker `{}` does not belong to any coordinator-led workflow", agent.id),
                format!("list `{}` under `workers:` of a workflow led by a coordinator, or change its role", agent.id),
            ),
            _ => {}
        }
    }
}

fn automations(c: &mut Checker<'_>, config: &Config, ids: &HashMap<&str, usize>) {
    c.unique(
        "automation",
        "automations",
        config.automations.iter().map(|a| a.id.as_str()),
    );
    for (i, auto) in config.automations.iter().enumerate() {
        let id = auto.id.as_str();
        c.name(c.value(at!["automations", i, "id"]), "automation id", id);
        if let Err(problem) = parse_schedule(&auto.schedule) {
            c.error(
                c.value(at!["automations", i, "schedule"]),
                format!("automation `{id}`: schedule `{}` is not a valid cron expression: {problem}", auto.schedule),
                "use 5 fields `minute hour day-of-month month day-of-week`, e.g. \"0 9 * * 1-5\" (a 6th field in front gives seconds), or @hourly, @daily, @weekly, @monthly, @yearly",
            );
        } else {
            schedule_checks(c, i, id, &auto.schedule);
        }
        if auto.catch_up_max_runs == 0 {
            c.error(
                c.value(at!["automations", i, "catch_up_max_runs"]),
                format!("automation `{id}`: catch_up_max_runs is 0"),
                "give how many missed occurrences `catch_up: all` runs at most (default 100); `catch_up: none` runs none of them",
            );
        }
        if let Some(zone) = &auto.timezone {
            if let Err(problem) = crate::schedule::zone(zone) {
                c.error(
                    c.value(at!["automations", i, "timezone"]),
                    format!("automation `{id}`: timezone {problem}"),
                    "use an IANA time zone name such as `Europe/Berlin`, `America/New_York` or `UTC`; leave it out for the machine's local zone",
                );
            }
        }
        if auto.catch_up_window_secs == 0 {
            c.error(
                c.value(at!["automations", i, "catch_up_window_secs"]),
                format!("automation `{id}`: catch_up_window_secs is 0"),
                "give the age in seconds up to which missed occurrences still run (e.g. 86400); `catch_up: none` runs none of them",
            );
        }
        automation_target(c, config, ids, i, auto);
        if let Some(session) = &auto.session {
            if let Err(problem) = check_name(session) {
                c.error(
                    c.value(at!["automations", i, "session"]),
                    format!("automation `{id}`: session name `{session}` is not valid: {problem}"),
                    "use only letters, digits, `-`, `_` and `.`, not starting with `.` or `-`",
                );
            }
        }
        if auto.request.trim().is_empty() {
            c.error(
                c.value(at!["automations", i, "request"]),
                format!("automation `{id}`: request is empty"),
                "write what the agent should be asked on each run",
            );
        }
    }
}

/// An automation names exactly one target: an agent that runs on its own, or a workflow.
fn automation_target(
    c: &mut Checker<'_>,
    config: &Config,
    ids: &HashMap<&str, usize>,
    i: usize,
    auto: &crate::config::AutomationConfig,
) {
    let id = auto.id.as_str();
    match (&auto.agent, &auto.workflow) {
        (Some(_), Some(_)) => c.error(
            c.key(at!["automations", i, "workflow"]),
            format!("automation `{id}` names both an agent and a workflow"),
            "keep exactly one of `agent:` and `workflow:`",
        ),
        (None, None) => c.error(
            c.value(at!["automations", i]),
            format!("automation `{id}` names neither an agent nor a workflow"),
            "add `agent: <id>` or `workflow: <id>`",
        ),
        (Some(agent), None) => {
            let pos = c.value(at!["automations", i, "agent"]);
            match ids.get(agent.as_str()).map(|&k| config.agents[k].role) {
                None => c.error(
                    pos,
                    format!("automation `{id}`: agent `{agent}` is not a defined agent"),
                    suggestion(agent, config.agents.iter().map(|a| a.id.as_str()), "agents"),
                ),
                Some(AgentRole::Worker) => c.error(
                    pos,
                    format!(
                        "automation `{id}`: agent `{agent}` is a worker and cannot run on its own"
                    ),
                    "target the workflow of its coordinator with `workflow: <id>` instead",
                ),
                Some(_) => {}
            }
        }
        (None, Some(flow)) => {
            if !config.workflows.iter().any(|f| &f.id == flow) {
                c.error(
                    c.value(at!["automations", i, "workflow"]),
                    format!("automation `{id}`: workflow `{flow}` is not defined"),
                    suggestion(
                        flow,
                        config.workflows.iter().map(|f| f.id.as_str()),
                        "workflows",
                    ),
                );
            }
        }
    }
}

fn role_name(role: AgentRole) -> &'static str {
    match role {
        AgentRole::Autonomous => "autonomous",
        AgentRole::Coordinator => "coordinator",
        AgentRole::Worker => "worker",
    }
}
