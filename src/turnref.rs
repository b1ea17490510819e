//! Turn references, as git names commits relative to `HEAD`: `@` is the latest turn of a
//! session (the current one unless a command names another), `@~N` the N-th turn before
//! it (`@~` is `@~1`). Every command that takes a turn id takes a reference too, resolved
//! here to the turn's id before the command goes on as with an id; anything else is a turn
//! id or a prefix, passed on unchanged.

use std::borrow::Cow;

use crate::error::{Next, Result, RuntimeError};
use crate::history::{Projection, Scope, Want};
use crate::workspace::Workspace;

/// How many turns back `text` names when it is a reference (`@` → 0, `@~2` → 2); `None`
/// when it is not one (an id or a prefix).
pub fn parse(text: &str) -> Result<Option<usize>> {
    let text = text.trim();
    let Some(rest) = text.strip_prefix('@') else {
        return Ok(None);
    };
    let back = match rest {
        "" => Some(0),
        "~" => Some(1),
        _ => rest
            .strip_prefix('~')
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse().ok()),
    };
    back.map(Some).ok_or_else(|| RuntimeError::Invalid {
        message: format!("{text:?} is not a turn reference"),
        hint: Next::say(
            "`@` is the latest turn of the session, `@~1` the one before it, `@~N` the N-th before it",
        ),
    })
}

/// The turn `text` names: for a reference, the id of that turn of `session` (`-s`, else
/// the current session); otherwise `text` itself, an id or a prefix the command resolves.
/// A reference past the session's first turn is exit 7, naming the session.
pub fn resolve<'a>(ws: &Workspace, text: &'a str, session: Option<&str>) -> Result<Cow<'a, str>> {
    let Some(back) = parse(text)? else {
        return Ok(Cow::Borrowed(text));
    };
    let ledger = ws.session_or_head(session)?;
    let projection = Projection::of(ws.repo(), Scope::Session(&ledger), Want::TURNS)?;
    let turns: Vec<&str> = projection
        .session_turns(&ledger)
        .map(|t| t.turn.as_str())
        .collect();
    match turns.len().checked_sub(back + 1) {
        Some(i) => Ok(Cow::Owned(turns[i].to_owned())),
        None => Err(RuntimeError::NoTurnAt {
            reference: text.trim().to_owned(),
            session: ws.shown_session(&ledger).to_owned(),
            turns: turns.len(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_and_what_is_not_one() {
        assert_eq!(parse("@").ok(), Some(Some(0)));
        assert_eq!(parse("@~").ok(), Some(Some(1)));
        assert_eq!(parse("@~3").ok(), Some(Some(3)));
        assert_eq!(parse(" @~12 ").ok(), Some(Some(12)));
        assert_eq!(parse("3f2a").ok(), Some(None));
        for bad in ["@x", "@~-1", "@~1x", "@^", "@~~"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
