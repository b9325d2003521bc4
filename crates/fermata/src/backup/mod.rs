//! `fermata backup DEST`: one consistent copy of everything a server needs to come back, taken
//! while `serve` runs and people type. The database is copied by its engine (SQLite's
//! `VACUUM INTO`, PostgreSQL's `pg_dump` in the custom format), never as a live file; the key
//! file goes beside it (sealed with a passphrase when asked), and the review artifacts kept on
//! disk go along. The copy is written into a hidden folder beside DEST and renamed into place
//! once whole, so DEST is a complete backup or absent. `restore` and `check` live beside it.

pub(crate) mod check;
mod manifest;
mod pg_tools;
pub(crate) mod restore;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fermata_store::{ChannelFilter, Storage};
use fermata_store_sql::SqlStorage;
use indicatif::{ProgressBar, ProgressStyle};

use crate::config::{KeySource, StorageKind, StorageSettings};
use crate::failure::Failure;
use crate::storage;
use manifest::{ArtifactsEntry, FileEntry, KeysEntry, Manifest, Part, write_synced};

/// The database copy's name inside a backup, per engine.
const SQLITE_COPY: &str = "database.sqlite";
const POSTGRES_COPY: &str = "database.pgdump";
/// The key file's name inside a backup: plain, or sealed with a passphrase.
const KEY_COPY: &str = "encryption-keys.toml";
const SEALED_KEY_COPY: &str = "encryption-keys.sealed";

/// What `fermata backup` was asked to do.
pub(crate) struct BackupRequest<'a> {
    pub dest: &'a Path,
    /// Seal the key file with this passphrase.
    pub passphrase: Option<zeroize::Zeroizing<String>>,
    /// The `pg_dump` to run, when the operator named one.
    pub pg_dump: Option<&'a Path>,
    /// Review artifacts are kept in a bucket (`[schema.artifacts]`), not in the data folder.
    pub artifacts_in_bucket: bool,
}

/// Takes the backup; returns what to print.
pub(crate) async fn backup(
    settings: &StorageSettings,
    keys: &KeySource,
    request: BackupRequest<'_>,
) -> Result<String, Failure> {
    let started = Instant::now();
    let partial = Partial::create(request.dest)?;
    let store = storage::open(settings).await?;
    let status = storage::require_current_schema(&store, "be backed up").await?;
    let mut manifest = Manifest::new(store.driver());
    manifest.migrations = status
        .applied
        .iter()
        .filter_map(|file| version_of(file))
        .collect();
    manifest.documents = document_count(&store).await?;
    manifest.taken_at = now_rfc3339();
    let size = store.database_size().await.unwrap_or(0);
    let copy_name = match settings.kind {
        StorageKind::Sqlite => SQLITE_COPY,
        StorageKind::Postgres => POSTGRES_COPY,
    };
    let copy = partial.path().join(copy_name);
    let bar = file_bar(&copy, size, "database");
    match settings.kind {
        StorageKind::Sqlite => store
            .copy_sqlite_into(&copy)
            .await
            .map_err(|error| Failure::store("cannot copy the database", error))?,
        StorageKind::Postgres => {
            let major = store
                .server_major_version()
                .await
                .map_err(|error| Failure::store("cannot read the server's version", error))?;
            let tool = pg_tools::find("pg_dump", request.pg_dump, major, "--pg-dump").await?;
            let url = settings
                .database_url
                .as_ref()
                .map_or("", |url| url.expose());
            let connection = pg_tools::Connection::parse(url)?;
            connection
                .run(
                    &tool,
                    &[
                        "--format=custom".as_ref(),
                        "--file".as_ref(),
                        copy.as_os_str(),
                    ],
                )
                .await?;
            manifest.pg_dump_major = Some(tool.major);
        }
    }
    bar.finish_and_clear();
    store.close().await;
    sync_file(&copy)?;
    manifest.database = FileEntry::of(partial.path(), copy_name)?;
    // The key file and the artifacts are taken after the database: keys are only ever added and
    // artifacts only written before the rows that name them, so both cover the database's state.
    manifest.keys = copy_keys(
        keys,
        partial.path(),
        request.passphrase.as_deref().map(String::as_str),
    )?;
    manifest.artifacts = if request.artifacts_in_bucket {
        Part::LeftOut {
            reason: "review artifacts are kept in the S3 bucket of [schema.artifacts]; back the \
                     bucket up with its own tools"
                .to_owned(),
        }
    } else {
        Part::Included(copy_artifacts(
            &settings
                .data_dir
                .join(fermata_schema::artifact::ARTIFACT_FOLDER),
            &partial
                .path()
                .join(fermata_schema::artifact::ARTIFACT_FOLDER),
        )?)
    };
    manifest.write(partial.path())?;
    let written = partial.finish()?;
    Ok(report(&manifest, &written, started.elapsed()))
}

/// The version number at the start of a migration's file name (`0003_users.sql` is 3).
fn version_of(file: &str) -> Option<i64> {
    file.split('_').next()?.parse().ok()
}

/// Every document, archived ones included.
async fn document_count(store: &SqlStorage) -> Result<usize, Failure> {
    let channels = store
        .collaboration()
        .list_channels(&ChannelFilter {
            repository: None,
            include_archived: true,
        })
        .await
        .map_err(|error| Failure::store("cannot count the documents", error))?;
    Ok(channels.len())
}

pub(crate) fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// Copies the key file into the backup, sealed when a passphrase is given.
fn copy_keys(
    keys: &KeySource,
    folder: &Path,
    passphrase: Option<&str>,
) -> Result<Part<KeysEntry>, Failure> {
    let path = match keys {
        KeySource::File { path, .. } => path,
        KeySource::Environment => {
            return Ok(Part::LeftOut {
                reason: "the keys come from FERMATA_KEYS: keep that secret with this backup, or \
                         the credentials it sealed cannot be opened"
                    .to_owned(),
            });
        }
    };
    if !path.exists() {
        return Ok(Part::LeftOut {
            reason: "there was no key file yet: nothing was sealed".to_owned(),
        });
    }
    let text = zeroize::Zeroizing::new(std::fs::read_to_string(path).map_err(|error| {
        Failure::runtime(format!(
            "cannot read the key file {}: {error}",
            path.display()
        ))
    })?);
    let (name, bytes) = match passphrase {
        Some(passphrase) => {
            let sealed = fermata_crypto::seal_with_passphrase(passphrase, text.as_bytes())
                .map_err(|error| Failure::config(format!("cannot seal the key file: {error}")))?;
            (SEALED_KEY_COPY, zeroize::Zeroizing::new(sealed))
        }
        None => (KEY_COPY, text),
    };
    write_synced(&folder.join(name), bytes.as_bytes())?;
    Ok(Part::Included(KeysEntry {
        file: FileEntry::of(folder, name)?,
        sealed: passphrase.is_some(),
    }))
}

/// Copies the artifact folder `from` (absent: none kept yet) to `to`, file by file.
fn copy_artifacts(from: &Path, to: &Path) -> Result<ArtifactsEntry, Failure> {
    let mut entry = ArtifactsEntry {
        folder: fermata_schema::artifact::ARTIFACT_FOLDER.to_owned(),
        files: 0,
        bytes: 0,
    };
    if !from.exists() {
        return Ok(entry);
    }
    copy_tree(from, to, &mut entry)?;
    Ok(entry)
}

fn copy_tree(from: &Path, to: &Path, entry: &mut ArtifactsEntry) -> Result<(), Failure> {
    let failed = |path: &Path, error: std::io::Error| {
        Failure::runtime(format!("cannot copy {}: {error}", path.display()))
    };
    std::fs::create_dir_all(to).map_err(|error| failed(to, error))?;
    for item in std::fs::read_dir(from).map_err(|error| failed(from, error))? {
        let item = item.map_err(|error| failed(from, error))?;
        let kind = item
            .file_type()
            .map_err(|error| failed(&item.path(), error))?;
        let target = to.join(item.file_name());
        if kind.is_dir() {
            copy_tree(&item.path(), &target, entry)?;
        } else if kind.is_file() {
            entry.bytes +=
                std::fs::copy(item.path(), &target).map_err(|error| failed(&item.path(), error))?;
            sync_file(&target)?;
            entry.files += 1;
        }
    }
    Ok(())
}

fn sync_file(path: &Path) -> Result<(), Failure> {
    std::fs::File::open(path)
        .and_then(|file| file.sync_all())
        .map_err(|error| Failure::runtime(format!("cannot flush {}: {error}", path.display())))
}

/// A bar that follows a file growing towards `expected` bytes (the engine's own count, so only
/// an estimate), drawn only when standard error is a terminal.
fn file_bar(path: &Path, expected: u64, what: &'static str) -> ProgressBar {
    let bar = ProgressBar::new(expected.max(1)).with_style(
        ProgressStyle::with_template(
            "{spinner} {prefix} {bytes} of about {total_bytes} {wide_bar}",
        )
        .expect("the bar template is valid"),
    );
    bar.set_prefix(what);
    bar.enable_steady_tick(Duration::from_millis(120));
    let (watched, path) = (bar.clone(), path.to_owned());
    tokio::spawn(async move {
        while !watched.is_finished() {
            if let Ok(metadata) = std::fs::metadata(&path) {
                watched.set_position(metadata.len().min(watched.length().unwrap_or(u64::MAX)));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    bar
}

fn report(manifest: &Manifest, written: &Path, took: Duration) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "backup written to {}", written.display());
    let _ = writeln!(
        out,
        "  {}: {} ({}), {} documents, {} migrations",
        manifest.database.file,
        human_bytes(manifest.database.bytes),
        manifest.engine,
        manifest.documents,
        manifest.migrations.len()
    );
    match &manifest.keys {
        Part::Included(keys) if keys.sealed => {
            let _ = writeln!(
                out,
                "  {}: the encryption keys, sealed with your passphrase; without it the \
                 credentials they sealed are lost",
                keys.file.file
            );
        }
        Part::Included(keys) => {
            let _ = writeln!(
                out,
                "  {}: the encryption keys, in the clear: store the backup where only \
                 administrators can read it (or seal it with --passphrase-file)",
                keys.file.file
            );
        }
        Part::LeftOut { reason } => {
            let _ = writeln!(out, "  encryption keys left out: {reason}");
        }
    }
    match &manifest.artifacts {
        Part::Included(artifacts) => {
            let _ = writeln!(
                out,
                "  {}/: {} review artifacts, {}",
                artifacts.folder,
                artifacts.files,
                human_bytes(artifacts.bytes)
            );
        }
        Part::LeftOut { reason } => {
            let _ = writeln!(out, "  review artifacts left out: {reason}");
        }
    }
    let _ = writeln!(out, "took {took:.1?}");
    out
}

pub(crate) fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    let mut value = bytes as f64;
    let mut unit = "bytes";
    for next in UNITS {
        if value < 1024.0 {
            break;
        }
        value /= 1024.0;
        unit = next;
    }
    format!("{value:.1} {unit}")
}

/// The backup while it is written: a hidden folder beside its final name, removed unless it
/// was renamed into place whole.
struct Partial {
    path: PathBuf,
    dest: PathBuf,
    finished: bool,
}

impl Partial {
    fn create(dest: &Path) -> Result<Partial, Failure> {
        if dest.exists() {
            return Err(Failure::config(format!(
                "{} exists already; a backup is written to a new folder",
                dest.display()
            )));
        }
        let name = dest
            .file_name()
            .and_then(|name| name.to_str())
            .ok_or_else(|| Failure::config("the backup's destination needs a folder name"))?;
        let parent = match dest.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
            _ => PathBuf::from("."),
        };
        let path = parent.join(format!(".{name}.partial-{}", std::process::id()));
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(&path).map_err(|error| {
            Failure::runtime(format!("cannot create {}: {error}", path.display()))
        })?;
        Ok(Partial {
            path,
            dest: dest.to_owned(),
            finished: false,
        })
    }

    fn path(&self) -> &Path {
        &self.path
    }

    /// Renames the whole backup into place; returns its final path.
    fn finish(mut self) -> Result<PathBuf, Failure> {
        if self.dest.exists() {
            return Err(Failure::config(format!(
                "{} appeared while the backup was written; it was left as it is",
                self.dest.display()
            )));
        }
        sync_folder(&self.path)?;
        std::fs::rename(&self.path, &self.dest).map_err(|error| {
            Failure::runtime(format!("cannot rename the backup into place: {error}"))
        })?;
        if let Some(parent) = self.dest.parent() {
            // The rename itself is durable once the folder holding it is flushed.
            let _ = sync_folder(if parent.as_os_str().is_empty() {
                Path::new(".")
            } else {
                parent
            });
        }
        self.finished = true;
        Ok(self.dest.clone())
    }
}

fn sync_folder(path: &Path) -> Result<(), Failure> {
    std::fs::File::open(path)
        .and_then(|folder| folder.sync_all())
        .map_err(|error| Failure::runtime(format!("cannot flush {}: {error}", path.display())))
}

impl Drop for Partial {
    fn drop(&mut self) {
        if !self.finished {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}
