//! Searches of the ledger: a literal matched case-insensitively in the raw bytes of the
//! segments ([`Matcher`]), narrowed through the term indexes when they can narrow it.

mod grep;
mod literal;

pub use grep::Searcher;
pub use literal::Matcher;
