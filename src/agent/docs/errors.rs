//! `DocsError`: every way a docs tool call can fail, whose `Display` is the original's error text
//! (`ERROR_MESSAGES` in docs-mcp's `src/constants/ErrorCodes.ts`), returned as the tool result's
//! text with no error flag.
//!
//! Uses nothing else in the module.

use std::fmt;

/// A failed docs tool call; its `Display` is exactly the text docs-mcp returns for it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DocsError {
    /// `fileId` is missing, not a string, or blank.
    FileIdRequired,
    /// `section_ids` is not an array of strings (or, for `section_table_of_contents`, is empty).
    SectionIdsRequired,
    /// A required string parameter is missing or blank (`query`, or a blank `fileId` in `search`).
    InvalidParameter {
        /// The parameter's name.
        name: &'static str,
    },
    /// `fileId` is not `f` followed by a number greater than zero.
    InvalidFileId {
        /// The id as given.
        file_id: String,
    },
    /// `fileId` is well formed but names no discovered file (strata's choice where the original
    /// answers with its generic parse or search error).
    FileIdNotFound {
        /// The id as given.
        file_id: String,
    },
    /// Some requested section ids are malformed or absent from the file.
    SectionNotFound {
        /// The ids that were not found, in request order.
        missing: Vec<String>,
        /// The file's name relative to its documentation directory.
        filename: String,
    },
    /// The search pattern does not compile, or uses a construct the linear-time engine refuses.
    InvalidRegex {
        /// Why, in the form `Invalid regular expression: /source/is: reason`.
        message: String,
    },
    /// A file could not be read while answering `table_of_contents`, `read_sections` or
    /// `section_table_of_contents`.
    ParseError,
    /// A file could not be read while searching.
    SearchError,
    /// Listing the documentation files failed.
    FileSystemError,
    /// The tool name is not one of the five docs tools.
    UnknownTool {
        /// The name as given.
        name: String,
    },
    /// Something that should not happen did (a result could not be serialised).
    InternalError,
}

impl fmt::Display for DocsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::FileIdRequired => f.write_str(
                "The fileId parameter is required. Use the list_documentation_files tool to see \
                 available files and their IDs.",
            ),
            Self::SectionIdsRequired => f.write_str(
                "The section_ids parameter must be an array of section identifiers. Use the \
                 table_of_contents tool first to get valid section IDs.",
            ),
            Self::InvalidParameter { name } => write!(
                f,
                "The '{name}' parameter is required and cannot be empty. Please provide a valid \
                 value."
            ),
            Self::InvalidFileId { file_id } => write!(
                f,
                "The file ID '{file_id}' is invalid. File IDs must be in the format 'f' followed \
                 by a number (e.g., 'f1', 'f2'). Use the list_documentation_files tool to see all \
                 valid file IDs."
            ),
            Self::FileIdNotFound { file_id } => write!(
                f,
                "The file ID '{file_id}' was not found. Use the list_documentation_files tool to \
                 see all available files and their IDs."
            ),
            Self::SectionNotFound { missing, filename } => write!(
                f,
                "The sections [{}] were not found in '{filename}'. Use the table_of_contents tool \
                 to see all available section IDs in this file.",
                missing.join(", ")
            ),
            Self::InvalidRegex { message } => write!(
                f,
                "Invalid regular expression pattern: {message}. Please check your regex syntax \
                 and try again."
            ),
            Self::ParseError => f.write_str(
                "An error occurred while parsing the markdown file. The file may be corrupted or \
                 in an unsupported format.",
            ),
            Self::SearchError => f.write_str(
                "An error occurred while searching documentation files. Please check that the \
                 file exists using the list_documentation_files tool.",
            ),
            Self::FileSystemError => f.write_str(
                "An error occurred while accessing the documentation files. This may be a \
                 permissions issue or the files may not be accessible.",
            ),
            Self::UnknownTool { name } => write!(
                f,
                "The tool '{name}' is not recognized. Use the tools/list command to see all \
                 available tools."
            ),
            Self::InternalError => f.write_str(
                "An unexpected internal error occurred. This may be a server issue. Please try \
                 again or contact support if the problem persists.",
            ),
        }
    }
}

impl std::error::Error for DocsError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_match_the_original() {
        assert_eq!(
            DocsError::InvalidFileId {
                file_id: "f0".into()
            }
            .to_string(),
            "The file ID 'f0' is invalid. File IDs must be in the format 'f' followed by a number \
             (e.g., 'f1', 'f2'). Use the list_documentation_files tool to see all valid file IDs."
        );
        assert_eq!(
            DocsError::SectionNotFound {
                missing: vec!["a".into(), "b".into()],
                filename: "guide.md".into()
            }
            .to_string(),
            "The sections [a, b] were not found in 'guide.md'. Use the table_of_contents tool to \
             see all available section IDs in this file."
        );
        assert_eq!(
            DocsError::InvalidParameter { name: "query" }.to_string(),
            "The 'query' parameter is required and cannot be empty. Please provide a valid value."
        );
        assert_eq!(
            DocsError::FileIdNotFound {
                file_id: "f9".into()
            }
            .to_string(),
            "The file ID 'f9' was not found. Use the list_documentation_files tool to see all \
             available files and their IDs."
        );
    }
}
