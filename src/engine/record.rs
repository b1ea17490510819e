//! What a running turn writes between its begin and its end: bounded text, warnings.

use axocoatl_store::ledger::record::{Bounded, Warning};
use axocoatl_store::ledger::Record;
use axocoatl_store::Repo;

use crate::clock;
use crate::error::Result;
use crate::turn::TurnEvent;

pub use crate::bounded::{bound, INLINE_LIMIT};

/// Where a running turn records: its repository, id and session.
#[derive(Clone, Copy)]
pub(crate) struct Recorder<'a> {
    pub repo: &'a Repo,
    pub turn: &'a str,
    pub session: &'a str,
}

impl Recorder<'_> {
    /// Appends without waiting for the disk (the terminal record's flush covers it).
    pub fn lazy(&self, records: &[Record]) -> Result<u64> {
        let appended = self.repo.ledger().append_lazy(records)?;
        Ok(appended.last().map(|a| a.seq).unwrap_or(0))
    }

    /// A warning record of the turn.
    pub fn warning(&self, code: &str, message: String) -> Record {
        Record::Warning(Warning {
            turn: Some(self.turn.to_owned()),
            session: self.session.to_owned(),
            code: code.to_owned(),
            message,
            at: clock::now(),
        })
    }

    /// Records a warning of the turn (lazily), without telling the caller.
    pub fn note(&self, code: &str, message: String) -> Result<()> {
        self.lazy(&[self.warning(code, message)])?;
        Ok(())
    }

    /// Tells the caller of a warning and records it.
    pub fn warn(
        &self,
        sink: &mut dyn FnMut(TurnEvent<'_>),
        code: &str,
        message: String,
    ) -> Result<()> {
        sink(TurnEvent::Warning {
            turn: self.turn.into(),
            message: message.as_str().into(),
        });
        self.note(code, message)
    }

    pub fn bound(&self, text: &str) -> Result<Bounded> {
        bound(self.repo.objects(), text)
    }

    /// [`Recorder::bound`] for output that was not UTF-8: `text` inline, `raw` whole.
    pub fn bound_bytes(&self, text: &str, raw: &[u8]) -> Result<Bounded> {
        crate::bounded::bound_bytes(self.repo.objects(), text, raw)
    }
}
