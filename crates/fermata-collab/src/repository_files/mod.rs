//! A repository as files: the manifest format and the export every caller shares (the
//! `fermata export` command into a folder, the repository page's download into an archive).
//! Reading files back (`fermata import`) is the command's, which holds the writer lease.

mod export;
pub mod manifest;

pub use export::{ExportError, ExportReport, ExportSink, manifest_of, write_files};
