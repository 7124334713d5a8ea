//! Why a model cannot be imported: one error, naming the operator or tensor and its index.

use std::fmt;

/// A model the importer cannot turn into a constmat net, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The bytes are not a valid TensorFlow Lite flatbuffer (truncated, corrupt, another
    /// format): the verifier's finding.
    Corrupt(String),
    /// Something the file holds that constmat has no layer or form for: where (an operator or
    /// a tensor, with its index) and what.
    Unsupported {
        /// `operator #3 (CONV_2D)`, `tensor #7 "conv1/weights"`, `the model`.
        at: String,
        /// What is not supported, and what is.
        what: String,
    },
}

impl Error {
    pub(crate) fn corrupt(what: impl fmt::Display) -> Self {
        Self::Corrupt(what.to_string())
    }

    pub(crate) fn unsupported(at: impl Into<String>, what: impl Into<String>) -> Self {
        Self::Unsupported {
            at: at.into(),
            what: what.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Corrupt(what) => write!(f, "not a valid TensorFlow Lite model: {what}"),
            Self::Unsupported { at, what } => write!(f, "{at}: {what}"),
        }
    }
}

impl std::error::Error for Error {}
