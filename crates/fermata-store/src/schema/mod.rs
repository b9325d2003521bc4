//! Schema snapshots: the values the schema-operation stores keep. The stores themselves arrive
//! with the operation workflow; what is here is what every part of it shares.

mod error;

pub use error::{DatabaseName, ErrorCode, ErrorStage, SafeError, Subject};
