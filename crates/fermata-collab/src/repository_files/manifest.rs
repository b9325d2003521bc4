//! The manifest of a repository written as files (`fermata-export.json`): its format name and
//! version, the repository, and per document its ID, title, slugs, archived state, parent, file
//! and images. The file layout it describes is in docs/documents.md, "Export and import"; the
//! rules for the paths it names (relative, inside the folder, no `.` or `..`) are checked here,
//! once, for every reader.

use serde::{Deserialize, Serialize};

/// The manifest's file name, at the top of the folder or archive.
pub const MANIFEST_FILE: &str = "fermata-export.json";
/// The format's name, which a reader checks first.
pub const FORMAT: &str = "fermata-repository-export";
/// The one version this release writes and reads.
pub const VERSION: u32 = 1;
/// The suffix of the folder beside a document that holds its images (`plan.images/`).
pub const IMAGES_SUFFIX: &str = ".images";

/// A repository written as files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub format: String,
    pub version: u32,
    /// The repository it was exported from, `OWNER/NAME`.
    pub repository: String,
    /// Parents before their children.
    pub documents: Vec<ManifestDocument>,
}

/// One document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestDocument {
    pub id: String,
    pub title: String,
    /// The canonical slug.
    pub slug: String,
    /// The slugs it had before, which still resolve to it.
    #[serde(default)]
    pub former_slugs: Vec<String>,
    #[serde(default)]
    pub archived: bool,
    /// The parent's ID, itself a document of this manifest.
    #[serde(default)]
    pub parent: Option<String>,
    /// Its canonical MDX: `SLUG.md`, or `PARENT-SLUG/SLUG.md` for a child.
    pub path: String,
    #[serde(default)]
    pub images: Vec<ManifestImage>,
}

/// One image a document holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestImage {
    /// The SHA-256 of its bytes: its ID and its address in the document's text.
    pub sha256: String,
    pub content_type: String,
    pub size: u64,
    /// `SLUG.images/SHA256.TYPE`, beside the document's file.
    pub path: String,
}

/// Why a path in a manifest is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the path `{0}` is not a relative path inside the folder")]
pub struct PathEscapes(pub String);

impl Manifest {
    /// A manifest of this release's format for `repository`.
    pub fn new(repository: &str, documents: Vec<ManifestDocument>) -> Self {
        Manifest {
            format: FORMAT.to_owned(),
            version: VERSION,
            repository: repository.to_owned(),
            documents,
        }
    }

    /// Whether this release reads it: the format's name and version.
    pub fn is_readable(&self) -> bool {
        self.format == FORMAT && self.version == VERSION
    }
}

/// The file of a document: `SLUG.md`, inside its parent's folder for a child.
pub fn document_path(parent_slug: Option<&str>, slug: &str) -> String {
    match parent_slug {
        Some(parent) => format!("{parent}/{slug}.md"),
        None => format!("{slug}.md"),
    }
}

/// The file of one of the images of the document at `document_path`.
pub fn image_path(document_path: &str, sha256: &str, extension: &str) -> String {
    let stem = document_path.strip_suffix(".md").unwrap_or(document_path);
    format!("{stem}{IMAGES_SUFFIX}/{sha256}.{extension}")
}

/// The path's parts when it is relative and stays inside the folder: no absolute path, drive
/// or backslash, no empty, `.` or `..` part, no control character.
pub fn checked_parts(path: &str) -> Result<Vec<&str>, PathEscapes> {
    let escapes = || PathEscapes(path.chars().filter(|c| !c.is_control()).collect());
    if path.is_empty() || path.contains('\\') || path.contains(':') || path.len() > 1024 {
        return Err(escapes());
    }
    let parts: Vec<&str> = path.split('/').collect();
    let bad = |part: &&str| {
        part.is_empty() || *part == "." || *part == ".." || part.chars().any(char::is_control)
    };
    if parts.iter().any(bad) {
        return Err(escapes());
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_folder() {
        for good in ["plan.md", "plan/child.md", "plan/child.images/ab.png"] {
            assert!(checked_parts(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "../x.md",
            "a/../../x.md",
            "a//b.md",
            "./a.md",
            "C:\\x.md",
            "a\\..\\b",
            "c:x",
        ] {
            assert!(checked_parts(bad).is_err(), "{bad:?}");
        }
        assert_eq!(document_path(Some("plan"), "child"), "plan/child.md");
        assert_eq!(
            image_path("plan/child.md", "ab", "png"),
            "plan/child.images/ab.png"
        );
    }

    #[test]
    fn only_this_format_and_version_are_read() {
        let manifest = Manifest::new("ada/notes", Vec::new());
        assert!(manifest.is_readable());
        let text = serde_json::to_string(&manifest).unwrap();
        let back: Manifest = serde_json::from_str(&text).unwrap();
        assert_eq!(back, manifest);
        assert!(
            !Manifest {
                version: 2,
                ..manifest.clone()
            }
            .is_readable()
        );
        assert!(
            !Manifest {
                format: "zip".into(),
                ..manifest
            }
            .is_readable()
        );
    }
}
