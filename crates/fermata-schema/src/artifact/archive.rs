//! The plaintext inside a review artifact: a deterministic tar archive of the canonical manifest,
//! the candidate files and the review notes, compressed; and the compression of the other sealed
//! objects (staged notes, drift diffs), each one LZ4 frame ([`compressed`], [`expanded`]).
//!
//! The format is tar with GNU headers, compressed as one LZ4 frame (`lz4 -d` and any `tar` list
//! a decrypted artifact): the candidate's SQL, its pretty-printed `schema.json` and the tar's
//! padding shrink to about a tenth, and so do the bytes sealed, hashed, written and read back. An
//! archive written before archives were compressed (plain tar, which begins with the manifest's
//! name rather than the frame's magic number) is read as well. The first
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
use std::io::{Read, Write};

use fermata_schema_core::{ErrorCode, SafeError};
use lz4_flex::frame::{FrameDecoder, FrameEncoder};
use tar::{Archive, Builder, EntryType, Header};
use zeroize::Zeroizing;

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
    let mut builder = Builder::new(FrameEncoder::new(Vec::new()));
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
        .or_code(UNAVAILABLE, "finish the archive")?
        .finish()
        .or_code(UNAVAILABLE, "compress the archive")
}

/// The first bytes of an LZ4 frame, which every archive (and every sealed note or drift diff)
/// written since they are compressed begins with. What was written before begins with the
/// manifest's name (an archive) or `{` (JSON), never with these.
const LZ4_FRAME_MAGIC: [u8; 4] = [0x04, 0x22, 0x4D, 0x18];

/// `bytes` as one LZ4 frame: what a sealed note or drift diff seals.
pub(crate) fn compressed(bytes: &[u8]) -> Result<Zeroizing<Vec<u8>>, SafeError> {
    let mut encoder = FrameEncoder::new(Vec::new());
    encoder
        .write_all(bytes)
        .or_code(UNAVAILABLE, "compress a sealed object")?;
    encoder
        .finish()
        .map(Zeroizing::new)
        .or_code(UNAVAILABLE, "compress a sealed object")
}

/// What [`compressed`] took, from its frame; bytes written before sealed objects were
/// compressed are returned as they are.
pub(crate) fn expanded(bytes: Zeroizing<Vec<u8>>) -> Result<Zeroizing<Vec<u8>>, SafeError> {
    if !bytes.starts_with(&LZ4_FRAME_MAGIC) {
        return Ok(bytes);
    }
    let mut plaintext = Zeroizing::new(Vec::new());
    FrameDecoder::new(bytes.as_slice())
        .read_to_end(&mut plaintext)
        .or_code(UNAVAILABLE, "expand a sealed object")?;
    Ok(plaintext)
}

fn append<W: Write>(builder: &mut Builder<W>, name: &str, bytes: &[u8]) -> Result<(), SafeError> {
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

/// Reads an archive [`archive`] wrote, compressed or (written before archives were) not.
pub(crate) fn unarchive(bytes: &[u8]) -> Result<ArtifactContents, SafeError> {
    if bytes.starts_with(&LZ4_FRAME_MAGIC) {
        read_entries(Archive::new(FrameDecoder::new(bytes)))
    } else {
        read_entries(Archive::new(bytes))
    }
}

/// The manifest, files and notes of `archive`, in the fixed layout or refused.
fn read_entries<R: Read>(mut archive: Archive<R>) -> Result<ArtifactContents, SafeError> {
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
    fn archives_are_compressed_and_those_written_before_are_read() {
        let files = BTreeMap::from([
            (
                "d/a.sql".to_owned(),
                b"CREATE TABLE `a` (x int)\n".repeat(100),
            ),
            (
                "d/schema.json".to_owned(),
                b"{\n  \"name\": \"a\"\n}\n".repeat(100),
            ),
        ]);
        let notes = BTreeMap::from([("d.json".to_owned(), b"{}".to_vec())]);
        let compressed = archive_with_notes(&files, &notes, "{}").unwrap();
        assert!(compressed.starts_with(&LZ4_FRAME_MAGIC));
        assert_eq!(
            compressed,
            archive_with_notes(&files, &notes, "{}").unwrap()
        );

        let mut builder = Builder::new(Vec::new());
        append(&mut builder, MANIFEST_ENTRY, b"{}").unwrap();
        for (path, bytes) in &files {
            append(&mut builder, &format!("{FILES_PREFIX}{path}"), bytes).unwrap();
        }
        append(&mut builder, "notes/d.json", b"{}").unwrap();
        let plain = builder.into_inner().unwrap();
        assert!(
            compressed.len() * 10 < plain.len(),
            "the archive was not compressed"
        );

        let expected = ArtifactContents {
            files,
            notes,
            manifest: "{}".to_owned(),
        };
        assert_eq!(unarchive(&compressed).unwrap(), expected);
        assert_eq!(unarchive(&plain).unwrap(), expected);
        // A frame cut short is refused, not read in part.
        assert!(unarchive(&compressed[..compressed.len() - 8]).is_err());
    }

    #[test]
    fn sealed_objects_are_compressed_and_those_written_before_are_read() {
        let json = b"{\"files\": [\"a\", \"a\", \"a\", \"a\", \"a\", \"a\"]}".repeat(50);
        let frame = compressed(&json).unwrap();
        assert!(frame.starts_with(&LZ4_FRAME_MAGIC) && frame.len() * 10 < json.len());
        assert_eq!(*expanded(frame).unwrap(), json);
        assert_eq!(*expanded(Zeroizing::new(json.clone())).unwrap(), json);
        let mut cut = compressed(&json).unwrap();
        let shorter = cut.len() - 8;
        cut.truncate(shorter);
        assert!(expanded(cut).is_err());
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
