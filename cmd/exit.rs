//! Exit codes, in one place. Scripts may rely on them; they never change meaning.

use axocoatl::ErrorKind;
use axocoatl_store::ledger::record::TurnState;

/// Success; for `send`, the turn completed.
pub const OK: i32 = 0;
/// An error (including an invalid configuration for `validate`).
pub const ERROR: i32 = 1;
/// The command line is wrong.
pub const USAGE: i32 = 2;
/// `send`/`retry`: the turn ended failed.
pub const TURN_FAILED: i32 = 3;
/// `send`/`retry`: the turn was stopped.
pub const TURN_STOPPED: i32 = 4;
/// `send`/`retry`: the turn was interrupted.
pub const TURN_INTERRUPTED: i32 = 5;
/// `stop`: the turn is not active (already completed, failed, stopped or interrupted).
pub const NOT_ACTIVE: i32 = 6;
/// No such turn, session or reference (or an ambiguous prefix).
pub const NOT_FOUND: i32 = 7;
/// The session already has an active turn.
pub const BUSY: i32 = 8;
/// `fsck` found problems.
pub const FSCK_FINDINGS: i32 = 9;
/// No repository here, or one this build cannot read.
pub const NO_REPO: i32 = 10;
/// The request was refused by a rule (retry with attachments, rewind of a busy session…).
pub const REFUSED: i32 = 11;
/// `send`/`retry`/`approve`/`chat`: the turn waits for a person's approval of a tool call
/// (its id and the `approve` command on stderr); its session stays held until it is
/// answered, stopped or expires.
pub const AWAITING_APPROVAL: i32 = 12;
/// A bug in axocoatl (an invariant broken, its own output failing to serialize): sysexits'
/// EX_SOFTWARE.
pub const INTERNAL: i32 = 70;

/// The exit code of an error of `kind`: the one place errors become exit codes.
pub fn code(kind: ErrorKind) -> i32 {
    match kind {
        ErrorKind::Failure => ERROR,
        ErrorKind::Usage => USAGE,
        ErrorKind::NotActive => NOT_ACTIVE,
        ErrorKind::NotFound => NOT_FOUND,
        ErrorKind::Busy => BUSY,
        ErrorKind::NoRepository => NO_REPO,
        ErrorKind::Refused => REFUSED,
        ErrorKind::Internal => INTERNAL,
        ErrorKind::AwaitingApproval => AWAITING_APPROVAL,
    }
}

/// The exit code of `send`/`retry` for a turn that ended in `state`.
pub fn for_turn(state: TurnState) -> i32 {
    match state {
        TurnState::Completed => OK,
        TurnState::Failed => TURN_FAILED,
        TurnState::Stopped => TURN_STOPPED,
        TurnState::Interrupted => TURN_INTERRUPTED,
    }
}

/// The table printed in `--help` of the top-level command.
pub const TABLE: &str = "\
Exit codes:
  0   success (send: the turn completed)
  1   error (validate: the configuration is invalid)
  2   bad command line
  3   the turn failed
  4   the turn was stopped
  5   the turn was interrupted
  6   stop: the turn is not active; approve: the call was already decided
  7   no such turn, session or reference
  8   the session already has an active turn
  9   fsck found problems
  10  no repository, or an unsupported repository format
  11  refused by a rule (e.g. retry of a turn that used attachments)
  12  the turn waits for approval of a tool call (approve answers it)
  70  internal error: a bug in axocoatl (please report it)";
