//! `FdConfig`: the settings of the original's `[file_descriptor]` section, with its defaults.
//!
//! Uses no sibling module.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The file descriptor settings (llmproc's `[file_descriptor]` TOML section and its defaults).
///
/// Deserialising fills missing fields with the defaults; call [`FdConfig::validate`] on the
/// result ([`super::FdTable::new`] does).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FdConfig {
    /// Whether large tool output and user input become descriptors (default `false`).
    pub enabled: bool,
    /// Tool output longer than this many characters is wrapped (default 8000).
    pub max_direct_output_chars: usize,
    /// The page size, in characters, of descriptors created from now on (default 4000).
    pub default_page_size: usize,
    /// User input longer than this many characters is paged when `page_user_input` (default 8000).
    pub max_input_chars: usize,
    /// Whether large user input becomes a descriptor (default `true`, as in the TOML schema;
    /// llmproc's manager alone defaulted to `false`).
    pub page_user_input: bool,
}

impl Default for FdConfig {
    fn default() -> Self {
        FdConfig {
            enabled: false,
            max_direct_output_chars: 8000,
            default_page_size: 4000,
            max_input_chars: 8000,
            page_user_input: true,
        }
    }
}

impl FdConfig {
    /// Checks that every size is greater than 0, as the original does.
    ///
    /// # Errors
    /// [`FdConfigError::NotPositive`] naming the first setting that is 0.
    pub fn validate(&self) -> Result<(), FdConfigError> {
        let sizes = [
            ("max_direct_output_chars", self.max_direct_output_chars),
            ("default_page_size", self.default_page_size),
            ("max_input_chars", self.max_input_chars),
        ];
        match sizes.into_iter().find(|(_, value)| *value == 0) {
            Some((setting, _)) => Err(FdConfigError::NotPositive { setting }),
            None => Ok(()),
        }
    }

    /// The text to append to the system prompt: `None` when disabled, otherwise the
    /// `<file_descriptor_instructions>` block, then the `<fd_user_input_instructions>` block when
    /// user input is paged (the original's two constants, blocks separated by a blank line).
    pub fn system_prompt_addition(&self) -> Option<String> {
        if !self.enabled {
            return None;
        }
        let mut text = String::from(super::FILE_DESCRIPTOR_INSTRUCTIONS);
        if self.page_user_input {
            text.push_str("\n\n");
            text.push_str(super::USER_INPUT_INSTRUCTIONS);
        }
        Some(text)
    }
}

/// A file descriptor setting that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FdConfigError {
    /// A size is 0; every size counts characters and must be greater than 0.
    NotPositive {
        /// The setting's name as in the configuration (`default_page_size`, …).
        setting: &'static str,
    },
}

impl fmt::Display for FdConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FdConfigError::NotPositive { setting } => write!(
                f,
                "file descriptor setting {setting} is 0; it counts characters and must be greater than 0"
            ),
        }
    }
}

impl std::error::Error for FdConfigError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_originals_and_valid() {
        let config = FdConfig::default();
        assert!(!config.enabled);
        assert_eq!(config.max_direct_output_chars, 8000);
        assert_eq!(config.default_page_size, 4000);
        assert_eq!(config.max_input_chars, 8000);
        assert!(config.page_user_input);
        assert_eq!(config.validate(), Ok(()));
        let parsed: FdConfig = serde_json::from_str(r#"{"enabled": true}"#).unwrap();
        assert_eq!(
            parsed,
            FdConfig {
                enabled: true,
                ..FdConfig::default()
            }
        );
        assert!(serde_json::from_str::<FdConfig>(r#"{"page_size": 3}"#).is_err());
    }

    #[test]
    fn a_zero_size_is_rejected_by_name() {
        let config = FdConfig {
            default_page_size: 0,
            ..FdConfig::default()
        };
        let err = config.validate().unwrap_err();
        assert_eq!(
            err,
            FdConfigError::NotPositive {
                setting: "default_page_size"
            }
        );
        assert_eq!(
            err.to_string(),
            "file descriptor setting default_page_size is 0; it counts characters and must be greater than 0"
        );
    }

    #[test]
    fn the_prompt_addition_follows_enabled_and_page_user_input() {
        assert_eq!(FdConfig::default().system_prompt_addition(), None);
        let on = FdConfig {
            enabled: true,
            page_user_input: false,
            ..FdConfig::default()
        };
        let text = on.system_prompt_addition().unwrap();
        assert!(text.starts_with("<file_descriptor_instructions>\n"));
        assert!(text.ends_with("</file_descriptor_instructions>"));
        let paging = FdConfig {
            page_user_input: true,
            ..on
        };
        let text = paging.system_prompt_addition().unwrap();
        assert!(text.contains("</file_descriptor_instructions>\n\n<fd_user_input_instructions>"));
        assert!(text.ends_with("</fd_user_input_instructions>"));
    }
}
