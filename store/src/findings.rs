//! What a consistency check of the store found ([`crate::fsck::check`] fills a [`Report`];
//! the checks of the memory files add to it).

use std::path::PathBuf;

/// What kind of problem a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FindingKind {
    /// The newest segment ends in an incomplete record, or is shorter than its header: a
    /// crash mid-write. `fsck --repair` truncates (or removes) it.
    TornTail,
    /// The newest segment ends in damage that no intact record follows: `fsck --repair`
    /// moves it aside and truncates.
    DamagedTail,
    /// A segment before the newest is missing: its records are lost.
    MissingSegment,
    /// A segment's header names another segment (a stray copy or a renamed file), or its
    /// base sequence does not continue the segment before it.
    StraySegment,
    /// A segment is damaged before its end.
    CorruptSegment,
    /// A record's payload does not decode.
    UndecodableRecord,
    /// A record of a kind this build does not know (written by a newer axocoatl).
    UnknownRecordKind,
    /// An object's content does not match its name.
    DamagedObject,
    /// A ledger record refers to an object that is not stored.
    MissingObject,
    /// An attachment's extracted text (or OCR text) is not what a text object must be.
    BadAttachmentText,
    /// A checkpoint does not decode; it will be ignored and rebuilt.
    BadCheckpoint,
    /// A memory file (core memory, daily log) does not parse, or has a newer version.
    BadMemoryFile,
    /// A core memory block is longer than its configured limit.
    OversizeMemoryBlock,
    /// `HEAD` is missing or does not name a session.
    BadHead,
    /// A directory of the layout is missing.
    MissingDirectory,
    /// A temporary file left by a process that died mid-write.
    StrayTempFile,
    /// A ledger index (a cache) is damaged, stale or stray: rebuilt when next needed.
    StaleIndex,
    /// An automation run record does not parse or does not fit its place.
    BadRunRecord,
    /// A semantic memory records file is damaged (or ends in a torn tail).
    BadSemanticRecords,
    /// A semantic memory cache (vectors, lexical index) does not check; it is rebuilt.
    StaleSemanticCache,
}

impl FindingKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::TornTail => "torn-tail",
            FindingKind::CorruptSegment => "corrupt-segment",
            FindingKind::UndecodableRecord => "undecodable-record",
            FindingKind::UnknownRecordKind => "unknown-record-kind",
            FindingKind::DamagedObject => "damaged-object",
            FindingKind::MissingObject => "missing-object",
            FindingKind::BadAttachmentText => "bad-attachment-text",
            FindingKind::BadCheckpoint => "bad-checkpoint",
            FindingKind::BadMemoryFile => "bad-memory-file",
            FindingKind::StaleIndex => "stale-index",
            FindingKind::OversizeMemoryBlock => "oversize-memory-block",
            FindingKind::DamagedTail => "damaged-tail",
            FindingKind::MissingSegment => "missing-segment",
            FindingKind::StraySegment => "stray-segment",
            FindingKind::BadHead => "bad-head",
            FindingKind::MissingDirectory => "missing-directory",
            FindingKind::StrayTempFile => "stray-temp-file",
            FindingKind::BadRunRecord => "bad-run-record",
            FindingKind::BadSemanticRecords => "bad-semantic-records",
            FindingKind::StaleSemanticCache => "stale-semantic-cache",
        }
    }

    /// Whether the finding makes the repository unclean (warnings do not).
    pub fn is_error(self) -> bool {
        !matches!(
            self,
            FindingKind::UnknownRecordKind
                | FindingKind::StrayTempFile
                | FindingKind::StaleIndex
                | FindingKind::StaleSemanticCache
        )
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub kind: FindingKind,
    pub file: PathBuf,
    pub offset: Option<u64>,
    pub message: String,
}

/// Counts of what was checked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub segments: u64,
    pub records: u64,
    pub objects: u64,
    pub checkpoints: u64,
    pub memory_files: u64,
    /// Automation run records (and their `since` markers).
    pub run_records: u64,
    pub findings: Vec<Finding>,
    /// Bytes cut from the ledger by `--repair`.
    pub repaired_bytes: u64,
    /// What `--repair` changed, one sentence each.
    pub repairs: Vec<String>,
    /// Pre-1.0 compatibility inputs seen (read, never changed: not findings).
    pub legacy: Vec<crate::legacy::Input>,
    /// Legacy directories with more entries than are ever considered.
    pub legacy_cut: Vec<PathBuf>,
}

impl Report {
    pub fn is_clean(&self) -> bool {
        !self.findings.iter().any(|f| f.kind.is_error())
    }
}
