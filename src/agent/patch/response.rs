//! `WritePatchResponse`: the result of `workspace_write_patch`, with the request echoed.
//!
//! Uses `request`, `conflict`, `line_ops`.
//!
//! Like the original's, a result always carries `success`, `errorCode` and `errorMessage` (null on
//! success) and echoes the batch's labels, keys and files; on success each file also carries its
//! new SHA-256 and the number of lines changed. The original's GUIDs (`batchId`, `filePatchId`,
//! `changeId`) are not made here: strata names a write by its toolcall object.

use serde::Serialize;

use super::conflict::Conflict;
use super::line_ops::AppliedFile;
use super::request::{ErrorCode, Failure, FilePatch, WritePatchRequest};

/// One file of a response: the request's fields echoed, and on success the new hash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileResult {
    /// The file's patch as the request gave it.
    #[serde(flatten)]
    pub patch: FilePatch,
    /// The SHA-256 of the file as written; absent unless the batch succeeded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_sha256: Option<String>,
    /// The number of lines removed plus lines written; absent unless the batch succeeded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines_changed: Option<usize>,
}

/// The result of `workspace_write_patch`: success or the failure as data, plus the echoed request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WritePatchResponse {
    /// Whether every file was written.
    pub success: bool,
    /// Why not, when not.
    pub error_code: Option<ErrorCode>,
    /// What went wrong, for the agent.
    pub error_message: Option<String>,
    /// For `CONFLICT`, the conflict: its kind, the current hash and a diff.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conflict: Option<Conflict>,
    /// The request's batch label, echoed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_label: Option<String>,
    /// The request's batch key, echoed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_key: Option<String>,
    /// The request's files, echoed in order.
    pub files: Vec<FileResult>,
}

impl WritePatchResponse {
    /// A failed batch, echoing `request` when there was one.
    pub fn failed(request: Option<&WritePatchRequest>, failure: Failure) -> Self {
        Self::with(request, Some(failure), None, &[])
    }

    /// A batch refused by `conflict`, which changed nothing; `message` says which file and why.
    pub fn conflict(request: &WritePatchRequest, message: String, conflict: Conflict) -> Self {
        let failure = Failure::new(ErrorCode::Conflict, message);
        Self::with(Some(request), Some(failure), Some(conflict), &[])
    }

    /// A batch written whole; `written` holds each file's result, in request order.
    pub fn applied(request: &WritePatchRequest, written: &[AppliedFile]) -> Self {
        Self::with(Some(request), None, None, written)
    }

    fn with(
        request: Option<&WritePatchRequest>,
        failure: Option<Failure>,
        conflict: Option<Conflict>,
        written: &[AppliedFile],
    ) -> Self {
        let request = request.cloned().unwrap_or_default();
        let files = request
            .files
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, patch)| FileResult {
                patch,
                new_sha256: written.get(i).map(|file| file.sha256.clone()),
                lines_changed: written.get(i).map(|file| file.lines_changed),
            })
            .collect();
        let (error_code, error_message) = match failure {
            Some(f) => (Some(f.error_code), Some(f.error_message)),
            None => (None, None),
        };
        Self {
            success: error_code.is_none(),
            error_code,
            error_message,
            conflict,
            batch_label: request.batch_label,
            batch_key: request.batch_key,
            files,
        }
    }
}
