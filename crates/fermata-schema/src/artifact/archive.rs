//! The plaintext inside a review artifact: a deterministic tar archive of the canonical manifest,
//! the candidate files and the review notes.
//!
//! The format is plain tar with GNU headers, so any `tar` can list a decrypted artifact. The first
//! entry is `manifest.json`; each candidate file follows as `files/<relative path>`, in byte order
//! of the path; then each review note (a changed database's migration scripts and lint findings,
//! which are not published as files) as `notes/<name>`, in byte order too. Every header is
//! fixed: regular file, mode `0644`, modification time 0, uid and gid 0, no user or group name. A path longer than the 100 bytes a tar header holds is written with a
//! GNU long-name record, whose header the `tar` crate also fixes. So identical input gives
//! identical bytes, and nothing of the machine that wrote it (clock, user, umask) gets in.
//!
//! Candidate paths are checked before anything is written: relative, `/`-separated, with no empty,
//! `.` or `..` component, no backslash and no NUL. Reading applies the same rules and also
//! requires the fixed layout (manifest first, then files and then notes, each in strictly
//! increasing order, regular files only), so an archive this module did not write is refused rather than interpreted.

use std::collections::BTreeMap;
use std::io::Read;

use fermata_schema_core::{ErrorCode, SafeError};
use tar::{Archive, Builder, EntryType, Header};

use crate::safe_context::{SafeCode, because};

/// The manifest's entry name.
const MANIFEST_ENTRY: &str = "manifest.json";
/// The folder every candidate file is archived under, so no candidate can take the manifest's
/// name.
const FILES_PREFIX: &str = "files/";
/// The folder the review notes are archived under, after the files.
const NOTES_PREFIX: &str = "notes/";
const FILE_MODE: u32 = 0o644;

/// One operation's candidate files and canonical manifest, as archived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactContents {
    /// Each candidate file by its relative path (`db-folder/tables/orders.sql`).
    pub files: BTreeMap<String, Vec<u8>>,
    /// Each review note by its name (`db-folder.json`); none in an artifact written before notes.
    pub notes: BTreeMap<String, Vec<u8>>,
    /// The canonical manifest (JSON).
    pub manifest: String,
}

/// The archive of `files` and `manifest`, without notes.
pub fn archive(files: &BTreeMap<String, Vec<u8>>, manifest: &str) -> Result<Vec<u8>, SafeError> {
    archive_with_notes(files, &BTreeMap::new(), manifest)
}

/// The archive of `files`, `notes` and `manifest`: the same bytes whenever the input is the same.
/// A path or note name that is not a clean relative path is refused.
pub fn archive_with_notes(
    files: &BTreeMap<String, Vec<u8>>,
    notes: &BTreeMap<String, Vec<u8>>,
    manifest: &str,
) -> Result<Vec<u8>, SafeError> {
    if !files
        .keys()
        .chain(notes.keys())
        .all(|path| is_relative_path(path))
    {
        return Err(malformed("a candidate path is not a clean relative path"));
    }
    let mut builder = Builder::new(Vec::with_capacity(archived_len(files, notes, manifest)));
    append(&mut builder, MANIFEST_ENTRY, manifest.as_bytes())?;
    // A `BTreeMap` iterates in byte order of its keys, which is the archive's order.
    for (path, bytes) in files {
        append(&mut builder, &format!("{FILES_PREFIX}{path}"), bytes)?;
    }
    for (name, bytes) in notes {
        append(&mut builder, &format!("{NOTES_PREFIX}{name}"), bytes)?;
    }
    builder
        .into_inner()
        .or_code(UNAVAILABLE, "finish the archive")
}

/// The tar format's block: every header, and every entry's content padded to a whole number.
const BLOCK: usize = 512;
/// The longest name a header holds; a longer one takes a GNU long-name record first.
const HEADER_NAME_LEN: usize = 100;

/// The length of the archive of `files`, `notes` and `manifest`, or a block or two more: the
/// buffer it is written into is allocated once rather than grown (and copied) as it fills.
fn archived_len(
    files: &BTreeMap<String, Vec<u8>>,
    notes: &BTreeMap<String, Vec<u8>>,
    manifest: &str,
) -> usize {
    let blocks = |len: usize| len.div_ceil(BLOCK) * BLOCK;
    let entry = |name: usize, content: usize| {
        let long_name = if name >= HEADER_NAME_LEN {
            BLOCK + blocks(name + 1)
        } else {
            0
        };
        long_name + BLOCK + blocks(content)
    };
    let files: usize = files
        .iter()
        .map(|(path, bytes)| entry(FILES_PREFIX.len() + path.len(), bytes.len()))
        .sum();
    let notes: usize = notes
        .iter()
        .map(|(name, bytes)| entry(NOTES_PREFIX.len() + name.len(), bytes.len()))
        .sum();
    // The archive ends with two empty blocks.
    entry(MANIFEST_ENTRY.len(), manifest.len()) + files + notes + 2 * BLOCK
}

fn append(builder: &mut Builder<Vec<u8>>, name: &str, bytes: &[u8]) -> Result<(), SafeError> {
    let mut header = Header::new_gnu();
    header.set_entry_type(EntryType::Regular);
    header.set_size(bytes.len() as u64);
    header.set_mode(FILE_MODE);
    header.set_mtime(0);
    header.set_uid(0);
    header.set_gid(0);
    builder
        .append_data(&mut header, name, bytes)
        .or_code(UNAVAILABLE, "add a file to the archive")
}

/// Reads an archive [`archive`] wrote.
pub(crate) fn unarchive(bytes: &[u8]) -> Result<ArtifactContents, SafeError> {
    let mut archive = Archive::new(bytes);
    let mut manifest = None;
    let mut files = BTreeMap::new();
    let mut notes = BTreeMap::new();
    let mut previous: Option<String> = None;
    const READ: &str = "read the archive";
    for entry in archive.entries().or_code(UNAVAILABLE, READ)? {
        let mut entry = entry.or_code(UNAVAILABLE, READ)?;
        if entry.header().entry_type() != EntryType::Regular {
            return Err(malformed("an archive entry is not a regular file"));
        }
        let name = String::from_utf8(entry.path_bytes().into_owned())
            .or_code(UNAVAILABLE, "read an archive entry's name")?;
        let mut content = Vec::new();
        entry.read_to_end(&mut content).or_code(UNAVAILABLE, READ)?;
        match manifest {
            None if name == MANIFEST_ENTRY => {
                manifest =
                    Some(String::from_utf8(content).or_code(UNAVAILABLE, "read the manifest")?);
            }
            None => return Err(malformed("the archive does not begin with the manifest")),
            Some(_) => {
                // Files first, then notes: an entry name orders them, and a note after a file
                // keeps the order strictly increasing.
                let (section, path) = match (
                    name.strip_prefix(FILES_PREFIX),
                    name.strip_prefix(NOTES_PREFIX),
                ) {
                    (Some(path), _) if notes.is_empty() => (&mut files, path),
                    (_, Some(path)) => (&mut notes, path),
                    _ => return Err(malformed("an archive entry is outside the files and notes")),
                };
                let in_order = previous
                    .as_deref()
                    .is_none_or(|before| before < name.as_str());
                if !is_relative_path(path) || !in_order {
                    return Err(malformed(
                        "an archive path is not clean or not in increasing order",
                    ));
                }
                section.insert(path.to_owned(), content);
                previous = Some(name);
            }
        }
    }
    Ok(ArtifactContents {
        files,
        notes,
        manifest: manifest.ok_or_else(|| malformed("the archive has no manifest"))?,
    })
}

/// Whether `path` is a clean relative path: `/`-separated components, none empty, `.` or `..`,
/// and no backslash or NUL anywhere (which another system could read as a separator or an end).
pub(crate) fn is_relative_path(path: &str) -> bool {
    !path.is_empty()
        && !path.contains(['\\', '\0'])
        && path
            .split('/')
            .all(|component| !matches!(component, "" | "." | ".."))
}

const UNAVAILABLE: ErrorCode = ErrorCode::ArtifactUnavailable;

/// An archive this module would not write.
fn malformed(reason: &'static str) -> SafeError {
    because(UNAVAILABLE, reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_relative_paths_only() {
        for good in ["a", "db/tables/orders.sql", "é t/ü x.sql", "a.b/..c/d.."] {
            assert!(is_relative_path(good), "{good:?} was refused");
        }
        for bad in [
            "",
            "/etc/passwd",
            "a/../b",
            "..",
            "./a",
            "a//b",
            "a/",
            "a\\b",
            "a\0b",
            "a/.",
        ] {
            assert!(!is_relative_path(bad), "{bad:?} was accepted");
        }
    }

    #[test]
    fn the_buffer_is_sized_for_the_whole_archive() {
        let long = "d/".to_owned() + &"x".repeat(300);
        for files in [
            BTreeMap::new(),
            BTreeMap::from([("d/a.sql".to_owned(), b"x".to_vec())]),
            BTreeMap::from([
                (long.clone(), vec![b'y'; 512]),
                ("d/b.sql".to_owned(), vec![b'z'; 513]),
                ("e".repeat(94), Vec::new()),
            ]),
        ] {
            let notes = BTreeMap::from([(long.clone(), b"{}".to_vec())]);
            let bytes = archive_with_notes(&files, &notes, "{}").unwrap();
            let sized = archived_len(&files, &notes, "{}");
            assert!(bytes.len() <= sized, "the archive outgrew its buffer");
            assert!(
                sized - bytes.len() <= 2 * BLOCK,
                "the buffer was far too large"
            );
        }
    }

    #[test]
    fn only_the_fixed_layout_is_read() {
        let files = BTreeMap::from([("d/a.sql".to_owned(), b"x".to_vec())]);
        let bytes = archive(&files, "{}").unwrap();
        assert_eq!(
            unarchive(&bytes).unwrap(),
            ArtifactContents {
                files,
                notes: BTreeMap::new(),
                manifest: "{}".to_owned()
            }
        );

        // A file before the manifest, a file outside `files/`, and files out of order.
        for entries in [
            vec![("files/a", "x"), (MANIFEST_ENTRY, "{}")],
            vec![(MANIFEST_ENTRY, "{}"), ("other/a", "x")],
            vec![(MANIFEST_ENTRY, "{}"), ("files/b", "x"), ("files/a", "x")],
            vec![(MANIFEST_ENTRY, "{}"), ("files/a", "x"), ("files/a", "y")],
            vec![(MANIFEST_ENTRY, "{}"), ("notes/a", "x"), ("files/a", "y")],
            vec![],
        ] {
            let mut builder = Builder::new(Vec::new());
            for (name, content) in &entries {
                append(&mut builder, name, content.as_bytes()).unwrap();
            }
            let bytes = builder.into_inner().unwrap();
            assert!(unarchive(&bytes).is_err(), "{entries:?} was read");
        }
    }
}
