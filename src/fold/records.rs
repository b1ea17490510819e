//! The fold itself: what each kind of record does to a turn. The one match in
//! [`TurnView::fold`] names every kind, so a kind added to the ledger does not compile
//! until it is decided here.

use std::collections::HashMap;

use axocoatl_store::ledger::record::{
    ApprovalDecided, ApprovalRequested, Bounded, InlineContext, Millis, ModelCallCost, PlanMade,
    SchemaUse, SubtaskEnded, SubtaskStarted, ToolFinished, ToolResult, ToolStarted, TurnBegun,
    TurnEnded, TurnOrigin, TurnOverrides, TurnState, UsageCost, UsageDetail,
};
use axocoatl_store::ledger::{Position, Record};

use super::{
    ApprovalView, CallView, ContextView, OriginView, PlanView, Share, Steps, SubtaskView,
    ToolEvent, TurnView, ViewState,
};

impl TurnView {
    /// The turn `record` begins; the record back when it begins none.
    #[expect(
        clippy::result_large_err,
        reason = "the record goes straight back to the caller, which goes on with it"
    )]
    pub fn start(record: Record, begin: Position, begin_seq: u64) -> Result<TurnView, Record> {
        match record {
            Record::TurnBegun(b) => Ok(TurnView::begun(b, begin, begin_seq)),
            other => Err(other),
        }
    }

    /// The JSON Schema the turn `record` begins had to match (`send --schema`), if it
    /// begins one that had: known without folding the turn.
    pub fn schema_of(record: &Record) -> Option<&SchemaUse> {
        if let Record::TurnBegun(b) = record {
            return b.schema.as_ref();
        }
        None
    }

    /// Folds one more record of this turn (one that names it, after its begin, in ledger
    /// order; `seq` is its sequence number).
    pub fn fold(&mut self, seq: u64, record: Record) {
        let at = record.at();
        match record {
            Record::AgentOutput(o) => self.add_output(o.agent, o.text),
            Record::AgentOutputBounded(o) => self.add_bounded_output(o.agent, o.text),
            Record::TurnOrigin(o) => self.origin = Some(origin_of(o)),
            Record::TurnOverrides(o) => self.overrides = Some(overrides_of(o)),
            Record::TurnWorkdir(w) => self.workdir = Some(w.dir),
            Record::TurnEnded(e) => self.end(seq, e),
            Record::ToolStarted(s) => self.tool_started(seq, s),
            Record::ToolFinished(r) => self.tool_finished(r),
            Record::ToolResult(r) => self.tool_result(r),
            Record::ModelCall(c) => self.call(seq, ModelCallCost::from(c)),
            Record::ModelCallCost(c) => self.call(seq, c),
            Record::UsageCost(c) => self.usage_cost(c),
            Record::StopRequested(_) => self.stop_requested = true,
            Record::Warning(w) => self.warnings.push(w.message),
            Record::PlanMade(m) => self.planned(seq, m),
            Record::SubtaskStarted(s) => self.subtask_started(seq, s),
            Record::SubtaskEnded(e) => self.subtask_ended(seq, e),
            Record::ActivationDecided(a) => self.activation = a.agents,
            Record::ApprovalRequested(r) => self.approval_requested(seq, r),
            Record::ApprovalDecided(d) => self.approval_decided(d),
            // A second begin (never written by axocoatl) changes nothing; the attachments a
            // turn consumed are the attachments' state (`crate::relations`), which the turn
            // shows from its begin's pins.
            Record::TurnBegun(_) | Record::AttachmentConsumed(_) => {}
            // Records of a session, not of a turn: never given to a turn (they name none).
            Record::RewindBoundary(_)
            | Record::SessionAgents(_)
            | Record::SessionCreated(_)
            | Record::AttachmentAdded(_)
            | Record::AttachmentRemoved(_)
            | Record::LegacyImportBegun(_)
            | Record::LegacyImportEnded(_)
            | Record::Note(_) => {}
        }
        if let Some(at) = at {
            self.steps.latest = self.steps.latest.max(at);
        }
    }

    fn begun(b: TurnBegun, begin: Position, begin_seq: u64) -> TurnView {
        TurnView {
            context: context_views(&b.inline_context),
            steps: Steps {
                last_at: HashMap::from([(b.agent.clone(), b.at)]),
                latest: b.at,
                ..Steps::default()
            },
            turn: b.turn,
            session: b.session,
            agent: b.agent,
            mode: b.mode,
            state: ViewState::Running,
            request: b.request,
            inline_context: b.inline_context,
            attachments: b.attachments,
            outputs: Vec::new(),
            output: String::new(),
            output_object: None,
            output_len: None,
            error: None,
            usage: None,
            detail: UsageDetail::default(),
            own: Share::default(),
            tools: Vec::new(),
            calls: Vec::new(),
            warnings: Vec::new(),
            retry_of: b.retry_of,
            origin: None,
            overrides: None,
            workdir: None,
            plan: None,
            subtasks: Vec::new(),
            activation: Vec::new(),
            schema: b.schema,
            value: None,
            approvals: Vec::new(),
            stop_requested: false,
            superseded: false,
            started_at: b.at,
            ended_at: None,
            begin,
            begin_seq,
            end_seq: None,
        }
    }

    fn add_output(&mut self, agent: String, text: String) {
        if !self.output.is_empty() && !text.is_empty() {
            self.output.push('\n');
        }
        self.output.push_str(&text);
        self.outputs.push((agent, text));
    }

    /// Output whose first bytes only are in the record; `output_object` names the whole
    /// text.
    fn add_bounded_output(&mut self, agent: String, text: Bounded) {
        self.add_output(agent, text.inline);
        self.output_object = text.object;
        self.output_len = Some(text.len);
    }

    fn end(&mut self, seq: u64, e: TurnEnded) {
        // Exactly one terminal record per turn; a second one (never written by axocoatl)
        // would not change the first.
        if self.end_seq.is_some() {
            return;
        }
        self.state = e.state.into();
        self.error = e.error;
        self.usage = Some(e.usage);
        self.ended_at = Some(e.at);
        self.end_seq = Some(seq);
        // As the indexes attribute it: less what the subtasks that ended while the turn
        // was open used; whole when that is more than the turn reports (a damaged ledger,
        // which `usage` reports).
        let handed = self
            .steps
            .handed
            .unwrap_or(axocoatl_store::ledger::record::Usage::ZERO);
        self.own.usage =
            Some(axocoatl_store::index::own_usage(e.usage, &handed).unwrap_or(e.usage));
        self.settle_subtasks();
        if self.schema.is_some() && e.state == TurnState::Completed {
            self.value = serde_json::from_str(&self.output).ok();
        }
    }

    /// A subtask without its end when the turn ended did not survive it.
    pub(crate) fn settle_subtasks(&mut self) {
        for s in self.subtasks.iter_mut() {
            if s.state == ViewState::Running {
                s.state = ViewState::Interrupted;
            }
        }
    }

    /// When `agent`'s step at hand started: when its previous step ended, else (its first
    /// step of the turn) when the latest subtask running it started, else at the turn's
    /// latest record.
    fn step_start(&self, agent: &str) -> Millis {
        if let Some(at) = self.steps.last_at.get(agent) {
            return *at;
        }
        self.subtasks
            .iter()
            .rev()
            .find(|s| s.agent == agent)
            .map_or(self.steps.latest, |s| s.started_at)
    }

    /// The subtask running `agent` at `at`, as far as the records folded so far say.
    fn subtask_of(&self, agent: &str, at: Millis) -> Option<usize> {
        self.subtasks.iter().rposition(|s| {
            s.agent == agent && s.started_at <= at && s.ended_at.is_none_or(|e| at <= e)
        })
    }

    fn call(&mut self, seq: u64, c: ModelCallCost) {
        let started_at = self.step_start(&c.agent).min(c.at);
        let subtask = self.subtask_of(&c.agent, c.at);
        self.steps.last_at.insert(c.agent.clone(), c.at);
        self.steps.last_call.insert(c.agent.clone(), seq);
        self.calls.push(CallView {
            provider: c.provider,
            model: c.model,
            reserved_tokens: c.reserved_tokens,
            prompt_tokens: c.prompt_tokens,
            completion_tokens: c.completion_tokens,
            cache_write_tokens: c.cache_write_tokens,
            cache_read_tokens: c.cache_read_tokens,
            cost_usd: c.cost_nanos.map(|n| n as f64 / crate::cost::NANOS_PER_USD),
            cost_nanos: c.cost_nanos,
            finish_reason: c.finish_reason,
            agent: c.agent,
            seq,
            at: c.at,
            started_at,
            subtask,
        });
    }

    /// A terminal record's cache tokens and cost: the turn's own calls', or (with a
    /// subtask) that worker's.
    fn usage_cost(&mut self, c: UsageCost) {
        self.detail.add(&c.detail);
        match c.subtask {
            None => self
                .own
                .detail
                .get_or_insert_with(UsageDetail::default)
                .add(&c.detail),
            Some(id) => {
                let ended = self
                    .subtasks
                    .iter_mut()
                    .rev()
                    .find(|s| s.subtask == id && s.ended_at.is_some());
                if let Some(s) = ended {
                    s.detail
                        .get_or_insert_with(UsageDetail::default)
                        .add(&c.detail);
                }
            }
        }
    }

    fn tool_started(&mut self, seq: u64, s: ToolStarted) {
        if let Some(a) = self
            .approvals
            .iter_mut()
            .rev()
            .find(|a| a.call_id == s.call_id)
        {
            a.started = true;
        }
        let subtask = self.subtask_of(&s.agent, s.at);
        let call_seq = self.steps.last_call.get(&s.agent).copied();
        self.steps.last_at.insert(s.agent.clone(), s.at);
        self.tools.push(ToolEvent {
            call_id: s.call_id,
            name: s.name,
            arguments: s.arguments.inline,
            arguments_object: s.arguments.object,
            output: None,
            output_object: None,
            is_error: false,
            exit_code: None,
            duration_ms: None,
            started_at: s.at,
            ended_at: None,
            round: self.calls.len(),
            agent: s.agent,
            seq,
            subtask,
            call_seq,
        });
    }

    /// The latest call of `call_id` (a result ends the latest call of its id).
    fn tool_mut(&mut self, call_id: &str) -> Option<&mut ToolEvent> {
        self.tools.iter_mut().rev().find(|e| e.call_id == call_id)
    }

    fn tool_finished(&mut self, r: ToolFinished) {
        self.steps.last_at.insert(r.agent, r.at);
        if let Some(ev) = self.tool_mut(&r.call_id) {
            ev.output = Some(r.output.inline);
            ev.output_object = r.output.object;
            ev.is_error = r.is_error;
            ev.exit_code = r.exit_code;
            ev.duration_ms = Some(r.duration_ms);
            ev.ended_at = Some(r.at);
        }
    }

    fn tool_result(&mut self, r: ToolResult) {
        self.steps.last_at.insert(r.agent, r.at);
        if let Some(ev) = self.tool_mut(&r.call_id) {
            ev.output = Some(r.output.inline);
            ev.output_object = r.output.object;
            ev.is_error = r.is_error;
            ev.ended_at = Some(r.at);
        }
    }

    fn approval_requested(&mut self, seq: u64, r: ApprovalRequested) {
        self.approvals.push(ApprovalView {
            call_id: r.call_id,
            tool: r.tool,
            arguments: r.arguments.inline,
            arguments_object: r.arguments.object,
            rule: r.rule,
            requested_at: r.at,
            expires_at: r.expires_at,
            decision: None,
            reason: None,
            by: None,
            decided_at: None,
            started: false,
            state: r.state,
            agent: r.agent,
            seq,
        });
    }

    /// Decides the latest request of its call id, once (a second decision, which only a
    /// lost race could write, changes nothing).
    fn approval_decided(&mut self, d: ApprovalDecided) {
        let held = self
            .approvals
            .iter_mut()
            .rev()
            .find(|a| a.call_id == d.call_id);
        if let Some(a) = held.filter(|a| a.decision.is_none()) {
            a.decision = Some(d.decision.as_str().to_owned());
            a.reason = d.reason;
            a.by = Some(d.by);
            a.decided_at = Some(d.at);
        }
    }

    fn planned(&mut self, seq: u64, m: PlanMade) {
        self.steps.last_at.insert(m.coordinator, m.at);
        self.plan = Some(PlanView {
            method: m.method,
            subtasks: m.subtasks,
            rejected: m.rejected,
            seq,
        });
    }

    fn subtask_started(&mut self, seq: u64, s: SubtaskStarted) {
        self.subtasks.push(SubtaskView {
            agent: runs_as(&s.worker, &s.subtask),
            subtask: s.subtask,
            worker: s.worker,
            state: ViewState::Running,
            error: None,
            output: String::new(),
            output_object: None,
            usage: None,
            started_at: s.at,
            ended_at: None,
            seq,
            detail: None,
        });
    }

    /// Ends the latest subtask of that id not ended yet (else the latest of that id; a
    /// subtask whose start is not recorded is taken as started when it ended). While the
    /// turn is open its usage is handed to its worker.
    fn subtask_ended(&mut self, seq: u64, e: SubtaskEnded) {
        let open = self
            .subtasks
            .iter()
            .rposition(|s| s.subtask == e.subtask && s.ended_at.is_none());
        let found = open.or_else(|| self.subtasks.iter().rposition(|s| s.subtask == e.subtask));
        let i = match found {
            Some(i) => i,
            None => {
                self.subtask_started(
                    seq,
                    SubtaskStarted {
                        turn: e.turn.clone(),
                        subtask: e.subtask.clone(),
                        worker: e.worker.clone(),
                        at: e.at,
                    },
                );
                self.subtasks.len() - 1
            }
        };
        if self.end_seq.is_none() {
            self.steps
                .handed
                .get_or_insert(axocoatl_store::ledger::record::Usage::ZERO)
                .add(&e.usage);
        }
        // The coordinator waits for its subtasks: its next call starts after them.
        let c = self.steps.last_at.entry(self.agent.clone()).or_insert(e.at);
        *c = (*c).max(e.at);
        let s = &mut self.subtasks[i];
        s.state = e.state.into();
        s.error = e.error;
        s.output = e.output.inline;
        s.output_object = e.output.object;
        s.usage = Some(e.usage);
        s.ended_at = Some(e.at);
    }
}

/// The worker of an ad-hoc subtask (`crate::team::ADHOC`, which sits above the fold).
const ADHOC: &str = "adhoc";

/// The agent id a subtask's records carry: the worker, or `adhoc:<subtask>`.
fn runs_as(worker: &str, subtask: &str) -> String {
    if worker == ADHOC {
        format!("{ADHOC}:{subtask}")
    } else {
        worker.to_owned()
    }
}

fn context_views(ctx: &[InlineContext]) -> Vec<ContextView> {
    ctx.iter()
        .map(|c| ContextView {
            label: c.label.clone(),
            len: c.text.len,
            object: c.text.object.clone(),
        })
        .collect()
}

fn origin_of(o: TurnOrigin) -> OriginView {
    OriginView {
        automation: o.automation,
        occurrence: o.occurrence,
        trigger: o.trigger,
        runner: o.runner,
        pid: o.pid,
    }
}

fn overrides_of(o: TurnOverrides) -> crate::overrides::Overrides {
    crate::overrides::Overrides {
        model: o.model,
        system: o.system,
        options: o.options,
    }
}
