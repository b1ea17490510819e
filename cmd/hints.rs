//! What to do next, in the command line's words: the runtime says what would help as a
//! [`Next`] value (list the turns, stop the active one, repair the store), and only here is
//! that turned into the verbs and flags a person types. MCP words the same values in its
//! own terms, and serve's socket carries them as values, so a command run through serve
//! prints exactly the hints it would print in process.

use axocoatl::error::{Next, Repair};
use axocoatl::RuntimeError;

/// The hints of `e`, one line each.
pub fn of(e: &RuntimeError) -> Vec<String> {
    all(&e.next())
}

/// Each of `next` in the command line's words.
pub fn all(next: &[Next]) -> Vec<String> {
    next.iter().map(words).collect()
}

/// One step in the command line's words.
pub fn words(next: &Next) -> String {
    let fsck = "run `axocoatl fsck` to see every problem";
    match next {
        Next::Say { text } => text.clone(),
        Next::FixConfig => "fix them and check with `axocoatl validate`".into(),
        Next::Validate => "run `axocoatl validate`".into(),
        Next::FixSchedule => {
            "fix its `schedule:` or `timezone:` and check with `axocoatl validate`".into()
        }
        Next::RestartServe => "edit axocoatl.yaml, `axocoatl validate` it, and restart serve".into(),
        Next::WriteConfig => {
            "`axocoatl init` writes a starter axocoatl.yaml; --config FILE points at another one"
                .into()
        }
        Next::InitRepository => {
            "run `axocoatl init` to create one here, or pass -C DIR, --repo DIR or AXOCOATL_DIR"
                .into()
        }
        Next::RedoInit => {
            "if `axocoatl init` was interrupted, remove the directory and run it again".into()
        }
        Next::CheckDisk => "a failed sync is an I/O error of the disk (see `dmesg`): check it, then run `axocoatl fsck`".into(),
        Next::Fsck => fsck.into(),
        Next::Repair { repair: Repair::TornTail } => {
            format!("{fsck}; `axocoatl fsck --repair` fixes a torn tail")
        }
        Next::Repair { repair: Repair::DamagedRecords } => format!(
            "{fsck}; `axocoatl fsck --repair` moves damaged records aside (to `damaged/` beside the file)"
        ),
        Next::FixMemoryFile => {
            format!("{fsck}; fix the file or remove it (its blocks start empty)")
        }
        Next::FreeSpace => "the disk is full: free space and run the command again; what was acknowledged before is kept (`axocoatl fsck` checks, `axocoatl fsck --repair` removes leftovers)".into(),
        Next::RaiseFileSizeLimit => "a file size limit was reached (`ulimit -f`): raise it and run the command again; what was acknowledged before is kept (`axocoatl fsck` checks)".into(),
        Next::StopOrWait { turn, command } => match (turn, command.as_str()) {
            (Some(t), "send") => {
                format!("wait for it, stop it with `axocoatl stop {t}`, or pass --wait to queue")
            }
            (None, "send") => "pass --wait to queue behind the active turn".into(),
            (t, command) => format!(
                "stop it (`axocoatl stop {}`) or wait for it, then {command}",
                t.as_deref().unwrap_or("<turn>")
            ),
        },
        Next::PipeTheText => "piped context has no such limit: give a short message as the argument and pipe the text, e.g. `axocoatl send \"summarize this\" < FILE`".into(),
        Next::ExportAnew => "the ledger was repaired or replaced since (see `axocoatl fsck`); export into a new file".into(),
        Next::WaitForAutomation => "pass --wait to run after it ends".into(),
        Next::Approve { .. } | Next::ApproveOrStop { .. } | Next::ListApprovals => {
            approval_words(next)
        }
        Next::CreateSession { name } => {
            format!("create it with `axocoatl sessions new {name}` (or `switch --create`)")
        }
        Next::SwitchSession { name } => {
            format!("switch to it with `axocoatl sessions switch {name}`")
        }
        Next::NameSession => "name the session: `axocoatl send -s NAME`".into(),
        Next::ListTurns => "`axocoatl history --all` lists turns".into(),
        Next::ListSchemas => "`axocoatl schemas` lists the stored schemas and their ids".into(),
        Next::ListSessionTurns { session } => format!("`axocoatl history -s {session}` lists them"),
        Next::GiveTurnId => "give a turn id or a unique prefix of at least 4 hex characters (see `axocoatl history`)".into(),
        Next::RefreshTurns => "only an active turn can be stopped; refresh with `axocoatl history` before acting again".into(),
        Next::RewindToACurrentTurn => {
            "rewind to a turn that is still part of the conversation (see `axocoatl history`)"
                .into()
        }
        Next::ShowBlock => "`axocoatl memory core show LABEL` prints the block".into(),
        Next::ShowSelection { session } => format!(
            "`axocoatl attach list -s {session}` shows the current selection; send again"
        ),
        Next::ImagesNeedAVisionProvider => "point the agent at an ollama or openai provider, or take the image out with `axocoatl attach rm REF`".into(),
        Next::ListAttachments => "`axocoatl attach list --all` lists the references of a session".into(),
        Next::ReadImage { reference } => {
            format!("`axocoatl attach cat {reference}` writes the image itself")
        }
        Next::RedirectAttachment { reference } => {
            format!("redirect it: axocoatl attach cat {reference} > FILE")
        }
        Next::StartServe => {
            "start it with `axocoatl serve` (alias `dev`); it runs in the foreground".into()
        }
        Next::RestartAgent { id } => format!(
            "fix its configuration (`axocoatl validate`), then `axocoatl agents restart {id}`"
        ),
        Next::RestartUpgradedServe { pid } => format!("stop it (kill -TERM {pid}) and start `axocoatl serve` again: serve and the commands that reach it must be the same build"),
        Next::SeeHowTheTurnEnded => "`axocoatl history` shows how the turn ended; the next command records it interrupted if serve died".into(),
        Next::RunFromMcpClient => "run `axocoatl mcp serve` from an MCP client (it speaks JSON-RPC on stdin and stdout)".into(),
        Next::ListModels { known } => {
            format!("known models: {} (`axocoatl models list`)", known.join(", "))
        }
        Next::FetchAgain { resumes: true } => {
            "run `axocoatl models fetch` again: it resumes where this download stopped".into()
        }
        Next::FetchAgain { resumes: false } => "run `axocoatl models fetch` again; if it happens again, a proxy or the package index serves other bytes".into(),
        Next::OtherIndex { because, env } => other_index(because.as_deref(), env),
    }
}

/// Another package index may help (`env` names it), and why.
fn other_index(because: Option<&str>, env: &str) -> String {
    let index = format!("{env} (or --index-url) names another package index, e.g. a mirror");
    match because {
        Some(b) => format!("{b}; {index}"),
        None => index,
    }
}

/// The steps about turns that wait for approval.
fn approval_words(next: &Next) -> String {
    match next {
        Next::Approve { turn } => format!(
            "approve with `axocoatl approve {turn}`, or deny with `axocoatl approve {turn} --deny --reason TEXT`"
        ),
        Next::ApproveOrStop { turn } => format!(
            "answer it (`axocoatl approve {turn}`, or `--deny`), or stop it (`axocoatl stop {turn}`); `axocoatl approvals` lists what waits"
        ),
        _ => "`axocoatl approvals` lists what waits for approval".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io_error(kind: std::io::ErrorKind) -> RuntimeError {
        RuntimeError::Store(axocoatl_store::Error::Io {
            op: "write",
            path: "x".into(),
            source: std::io::Error::from(kind),
        })
    }

    #[test]
    fn a_full_disk_and_a_file_size_limit_say_what_to_do() {
        let full = of(&io_error(std::io::ErrorKind::StorageFull));
        assert!(full[0].starts_with("the disk is full"), "{full:?}");
        let big = of(&io_error(std::io::ErrorKind::FileTooLarge));
        assert!(big[0].contains("ulimit -f"), "{big:?}");
        assert!(of(&io_error(std::io::ErrorKind::PermissionDenied)).is_empty());
    }

    /// A value crosses serve's socket as JSON and is worded the same on the other side.
    #[test]
    fn a_step_reads_the_same_after_the_socket() {
        let busy = Next::StopOrWait {
            turn: Some("0123abcd".into()),
            command: "send".into(),
        };
        let json = serde_json::to_string(&busy).expect("serializes");
        assert_eq!(
            json,
            r#"{"next":"stop_or_wait","turn":"0123abcd","command":"send"}"#
        );
        let back: Next = serde_json::from_str(&json).expect("parses");
        assert_eq!(words(&back), words(&busy));
    }
}
