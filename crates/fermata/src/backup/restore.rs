//! `fermata restore SRC`: a backup brought back into the data folder or PostgreSQL database the
//! storage settings name. Everything is checked before anything is written: the manifest's
//! format and version, each file's size and SHA-256, the key file (opened with the passphrase
//! when sealed), and that the target holds no data (unless `--force` names it) and no server
//! serves it. Then the database is restored by its engine, the key file and the artifacts put
//! in place, newer migrations applied, every document verified as recovery would, and every
//! stored credential opened with the restored keys.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fermata_accounts::{AccountSettings, Accounts, KeyringHandle};
use fermata_store::Storage;
use fermata_store_sql::SqlStorage;

use super::manifest::{Manifest, Part};
use super::{check, copy_artifacts, human_bytes, pg_tools, sync_file, sync_folder};
use crate::config::{KeySource, StorageKind, StorageSettings, ensure_data_dir};
use crate::failure::Failure;
use crate::storage::{self, SQLITE_FILE};
use crate::{keys, storage::prepare_schema};

/// What `fermata restore` was asked to do.
pub(crate) struct RestoreRequest<'a> {
    pub src: &'a Path,
    /// Opens a sealed key file.
    pub passphrase: Option<zeroize::Zeroizing<String>>,
    /// Restore over a database that holds data: its name (PostgreSQL) or its data folder.
    pub force: Option<&'a str>,
    pub pg_restore: Option<&'a Path>,
    pub artifacts_in_bucket: bool,
}

/// Restores the backup; returns what to print. Damage found afterwards fails the command, with
/// the report printed first.
pub(crate) async fn restore(
    settings: &StorageSettings,
    key_source: &KeySource,
    request: RestoreRequest<'_>,
) -> Result<String, Failure> {
    let manifest = Manifest::read(request.src)?;
    let engine = match settings.kind {
        StorageKind::Sqlite => "sqlite",
        StorageKind::Postgres => "postgres",
    };
    if manifest.engine != engine {
        return Err(Failure::config(format!(
            "the backup is of a {} database and the storage settings name a {engine} one; \
             restore it with --storage {}",
            manifest.engine, manifest.engine
        )));
    }
    let database_copy = manifest.database.check(request.src)?;
    let key_text = read_keys(
        &manifest,
        request.src,
        request.passphrase.as_deref().map(String::as_str),
    )?;
    let target = Target::inspect(settings, request.force).await?;
    let key_plan = plan_keys(
        key_source,
        key_text.as_deref().map(String::as_str),
        request.force.is_some(),
    )?;

    // Checked; from here on the target is written.
    match &target {
        Target::Sqlite { file } => put_sqlite(&database_copy, file)?,
        Target::Postgres { connection } => {
            let at_least = manifest.pg_dump_major.unwrap_or(0);
            let tool =
                pg_tools::find("pg_restore", request.pg_restore, at_least, "--pg-restore").await?;
            let mut args: Vec<&std::ffi::OsStr> = [
                "--no-owner",
                "--no-privileges",
                "--exit-on-error",
                "--single-transaction",
            ]
            .map(std::ffi::OsStr::new)
            .to_vec();
            if request.force.is_some() {
                args.extend(["--clean", "--if-exists"].map(std::ffi::OsStr::new));
            }
            args.push(database_copy.as_os_str());
            connection.run(&tool, &args).await?;
        }
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "restored the {} database taken at {} by {} ({}, {} documents then)",
        manifest.engine,
        manifest.taken_at,
        manifest.release,
        human_bytes(manifest.database.bytes),
        manifest.documents
    );
    key_plan.apply(&mut out)?;
    restore_artifacts(&manifest, &request, settings, &mut out)?;

    let store = storage::open(settings).await?;
    let before = store
        .migration_status()
        .await
        .map_err(|error| Failure::store("the restored schema cannot be used", error))?;
    prepare_schema(&store, true).await?;
    for file in &before.pending {
        let _ = writeln!(out, "applied migration {file}");
    }
    let verification = check::verify(&store).await?;
    out.push_str(&check::describe(&verification));
    let sealed = open_credentials(&store, key_source).await?;
    store.close().await;
    let _ = writeln!(
        out,
        "stored credentials: {} open with the restored keys, {} do not",
        sealed.opened, sealed.undecryptable
    );
    if verification.damaged.is_empty() && sealed.undecryptable == 0 {
        return Ok(out);
    }
    print!("{out}");
    Err(Failure::runtime(
        "the backup was restored, but not everything in it could be verified (see above)",
    ))
}

/// The key file's text from the backup, opened with the passphrase when sealed.
fn read_keys(
    manifest: &Manifest,
    src: &Path,
    passphrase: Option<&str>,
) -> Result<Option<zeroize::Zeroizing<String>>, Failure> {
    let Part::Included(keys) = &manifest.keys else {
        return Ok(None);
    };
    let path = keys.file.check(src)?;
    let text =
        zeroize::Zeroizing::new(std::fs::read_to_string(&path).map_err(|error| {
            Failure::runtime(format!("cannot read {}: {error}", path.display()))
        })?);
    let text = if keys.sealed {
        let passphrase = passphrase.ok_or_else(|| {
            Failure::config(
                "the backup's key file is sealed with a passphrase: give it with \
                 --passphrase-file or --passphrase-stdin",
            )
        })?;
        let plain = fermata_crypto::open_with_passphrase(passphrase, &text)
            .map_err(|error| Failure::config(format!("cannot open the key file: {error}")))?;
        zeroize::Zeroizing::new(
            String::from_utf8(plain.to_vec())
                .map_err(|_| Failure::config("the sealed key file does not hold text"))?,
        )
    } else {
        text
    };
    fermata_crypto::Keyring::from_key_file(&text)
        .map_err(|error| Failure::config(format!("the backup's key file is invalid: {error}")))?;
    Ok(Some(text))
}

/// Where the backup goes, checked to hold no data (unless forced) and to be served by nobody.
enum Target {
    Sqlite { file: PathBuf },
    Postgres { connection: pg_tools::Connection },
}

impl Target {
    async fn inspect(settings: &StorageSettings, force: Option<&str>) -> Result<Target, Failure> {
        let (target, name, existing) = match settings.kind {
            StorageKind::Sqlite => {
                let file = settings.data_dir.join(SQLITE_FILE);
                let existing = file.exists();
                let name = settings.data_dir.display().to_string();
                (Target::Sqlite { file }, name, existing)
            }
            StorageKind::Postgres => {
                let url = settings
                    .database_url
                    .as_ref()
                    .map_or("", |url| url.expose());
                let connection = pg_tools::Connection::parse(url)?;
                let name = connection.database.clone();
                (Target::Postgres { connection }, name, true)
            }
        };
        if !existing {
            return Ok(target);
        }
        let store = storage::open(settings).await?;
        let tables = store
            .own_table_count()
            .await
            .map_err(|error| Failure::store("cannot look into the target database", error))?;
        if tables > 0 {
            refuse_unless_forced(settings, &name, force)?;
            refuse_if_served(&store).await?;
        }
        store.close().await;
        Ok(target)
    }
}

fn refuse_unless_forced(
    settings: &StorageSettings,
    name: &str,
    force: Option<&str>,
) -> Result<(), Failure> {
    let named = force.is_some_and(|given| match settings.kind {
        StorageKind::Postgres => given == name,
        StorageKind::Sqlite => {
            let same = |a: &Path, b: &Path| {
                a == b
                    || a.canonicalize()
                        .ok()
                        .zip(b.canonicalize().ok())
                        .is_some_and(|(a, b)| a == b)
            };
            same(Path::new(given), &settings.data_dir)
                || same(Path::new(given), &settings.data_dir.join(SQLITE_FILE))
        }
    });
    if named {
        return Ok(());
    }
    Err(Failure::config(format!(
        "the target database ({name}) holds data already; restore into an empty one, or name it \
         with --force {name} to replace what it holds"
    )))
}

async fn refuse_if_served(store: &SqlStorage) -> Result<(), Failure> {
    // A database without the lease table (or, from an earlier release, the cluster's tables)
    // was never served by this release.
    let Ok(served) = crate::storage::is_served(store).await else {
        return Ok(());
    };
    if !served {
        return Ok(());
    }
    Err(Failure::config(
        "a server serves the target database (it holds the writer lease, or a cluster's): stop \
         it before restoring",
    ))
}

/// Puts the SQLite copy in place of `file`: written beside it, flushed, then renamed over it,
/// with the old file's write-ahead log and shared memory removed first so they never join it.
fn put_sqlite(copy: &Path, file: &Path) -> Result<(), Failure> {
    let folder = file.parent().unwrap_or(Path::new("."));
    ensure_data_dir(folder).map_err(|error| {
        Failure::runtime(format!("cannot create {}: {error}", folder.display()))
    })?;
    let staged = folder.join(format!(".{SQLITE_FILE}.restoring-{}", std::process::id()));
    std::fs::copy(copy, &staged)
        .map_err(|error| Failure::runtime(format!("cannot write {}: {error}", staged.display())))?;
    sync_file(&staged)?;
    for suffix in ["-wal", "-shm"] {
        let side = PathBuf::from(format!("{}{suffix}", file.display()));
        if side.exists() {
            std::fs::remove_file(&side).map_err(|error| {
                Failure::runtime(format!("cannot remove {}: {error}", side.display()))
            })?;
        }
    }
    std::fs::rename(&staged, file)
        .map_err(|error| Failure::runtime(format!("cannot write {}: {error}", file.display())))?;
    sync_folder(folder)
}

/// What becomes of the key file, decided before anything is written.
enum KeyPlan<'a> {
    /// Write the backup's key file at `path`, moving a different one aside when forced.
    Write {
        path: PathBuf,
        text: &'a str,
        replaced: bool,
    },
    /// The target already has the same key file.
    Same,
    /// The keys come from FERMATA_KEYS here.
    Environment { in_backup: bool },
    /// The backup has no key file.
    None { reason: String },
}

fn plan_keys<'a>(
    source: &KeySource,
    text: Option<&'a str>,
    forced: bool,
) -> Result<KeyPlan<'a>, Failure> {
    let path = match source {
        KeySource::Environment => {
            return Ok(KeyPlan::Environment {
                in_backup: text.is_some(),
            });
        }
        KeySource::File { path, .. } => path.clone(),
    };
    let Some(text) = text else {
        return Ok(KeyPlan::None {
            reason: "the backup holds no key file (see its manifest)".to_owned(),
        });
    };
    let existing = match std::fs::read_to_string(&path) {
        Ok(existing) => Some(zeroize::Zeroizing::new(existing)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => {
            return Err(Failure::runtime(format!(
                "cannot read the key file {}: {error}",
                path.display()
            )));
        }
    };
    match existing {
        Some(existing) if existing.as_str() == text => Ok(KeyPlan::Same),
        Some(_) if !forced => Err(Failure::config(format!(
            "the key file {} holds other keys than the backup's; restore into a new data folder, \
             or give --force to move it aside",
            path.display()
        ))),
        existing => Ok(KeyPlan::Write {
            path,
            text,
            replaced: existing.is_some(),
        }),
    }
}

impl KeyPlan<'_> {
    fn apply(&self, out: &mut String) -> Result<(), Failure> {
        match self {
            KeyPlan::Write {
                path,
                text,
                replaced,
            } => {
                if let Some(folder) = path.parent() {
                    ensure_data_dir(folder).map_err(|error| {
                        Failure::runtime(format!("cannot create {}: {error}", folder.display()))
                    })?;
                }
                if *replaced {
                    let aside = PathBuf::from(format!("{}.before-restore", path.display()));
                    std::fs::rename(path, &aside).map_err(|error| {
                        Failure::runtime(format!("cannot move {} aside: {error}", path.display()))
                    })?;
                    let _ = writeln!(out, "moved the former key file to {}", aside.display());
                }
                let keyring = fermata_crypto::Keyring::from_key_file(text).map_err(|error| {
                    Failure::config(format!("the backup's key file is invalid: {error}"))
                })?;
                keys::save(path, &keyring)?;
                let _ = writeln!(
                    out,
                    "wrote the backup's encryption keys to {}",
                    path.display()
                );
            }
            KeyPlan::Same => {
                let _ = writeln!(out, "the key file in place already holds the backup's keys");
            }
            KeyPlan::Environment { in_backup } => {
                let _ = writeln!(
                    out,
                    "the keys come from FERMATA_KEYS here{}",
                    if *in_backup {
                        "; the backup's key file was not written anywhere"
                    } else {
                        ""
                    }
                );
            }
            KeyPlan::None { reason } => {
                let _ = writeln!(out, "no key file written: {reason}");
            }
        }
        Ok(())
    }
}

fn restore_artifacts(
    manifest: &Manifest,
    request: &RestoreRequest<'_>,
    settings: &StorageSettings,
    out: &mut String,
) -> Result<(), Failure> {
    let Part::Included(artifacts) = &manifest.artifacts else {
        return Ok(());
    };
    if artifacts.files == 0 {
        return Ok(());
    }
    let from = request.src.join(&artifacts.folder);
    if request.artifacts_in_bucket {
        let _ = writeln!(
            out,
            "the backup's {} review artifacts are in {}: this server keeps them in a bucket, so \
             copy them there under the same names",
            artifacts.files,
            from.display()
        );
        return Ok(());
    }
    let to = settings
        .data_dir
        .join(fermata_schema::artifact::ARTIFACT_FOLDER);
    let copied = copy_artifacts(&from, &to)?;
    let _ = writeln!(
        out,
        "restored {} review artifacts ({})",
        copied.files,
        human_bytes(copied.bytes)
    );
    Ok(())
}

/// Opens every stored credential with the keys the restored server will load.
async fn open_credentials(
    store: &SqlStorage,
    source: &KeySource,
) -> Result<fermata_accounts::SealedCheck, Failure> {
    let keyring: KeyringHandle = keys::handle(source)?;
    let storage: Arc<dyn Storage> = Arc::new(store.clone());
    let accounts = Accounts::new(storage, Arc::new(keyring), AccountSettings::default());
    Ok(accounts.check_sealed().await?)
}
