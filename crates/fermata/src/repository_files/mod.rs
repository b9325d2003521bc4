//! `fermata export OWNER/NAME DIR` and `fermata import DIR OWNER/NAME`: a repository written as
//! files and read back (the layout, the manifest and the rules are in docs/documents.md, "Export
//! and import"). Export only reads, beside a server or not. Import holds the writer lease while
//! it writes (`writer.rs`), so it refuses to run while a server serves the database.

mod import;
mod input;
mod writer;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fermata_collab::repository_files::manifest::checked_parts;
use fermata_collab::repository_files::{self, ExportSink};
use fermata_collab::{Documents, Media, RoomManager, WriterFence};
use fermata_metrics::Metrics;
use fermata_store::{Repository, Storage, UserName};
use indicatif::{ProgressBar, ProgressStyle};

use crate::config::RepositoryFileSettings;
use crate::failure::Failure;
use crate::serve::VERSION;
use crate::storage;

/// The documents and media services of a command, writing under `fence` (empty for export).
fn services(
    shared: Arc<dyn Storage>,
    fence: &WriterFence,
    settings: &RepositoryFileSettings,
    metrics: Arc<Metrics>,
) -> (Documents, Media) {
    let rooms = RoomManager::new(
        Arc::clone(&shared),
        fermata_collab::DocumentFences::whole(fence.clone()),
        settings.collab,
        metrics,
    );
    let media = Media::new(Arc::clone(&shared), fence.clone(), settings.media);
    (Documents::new(shared, fence.clone(), rooms), media)
}

fn repository_named(name: &str) -> Result<Repository, Failure> {
    Repository::new(name)
        .ok()
        .filter(|repository| repository.owner_and_name().is_some())
        .ok_or_else(|| Failure::config(format!("`{name}` is not a repository name OWNER/NAME")))
}

/// A bar of `len` documents on standard error, drawn only on a terminal.
fn documents_bar(len: usize, doing: &'static str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len as u64).with_message(doing);
    if let Ok(style) = ProgressStyle::with_template("{msg} {wide_bar} {pos}/{len} documents") {
        bar.set_style(style);
    }
    bar
}

/// Writes files under a folder.
struct FolderSink {
    root: PathBuf,
}

impl ExportSink for FolderSink {
    async fn put(&mut self, path: &str, bytes: Vec<u8>) -> std::io::Result<()> {
        let parts = checked_parts(path).map_err(std::io::Error::other)?;
        let file = parts
            .iter()
            .fold(self.root.clone(), |at, part| at.join(part));
        tokio::task::spawn_blocking(move || {
            if let Some(folder) = file.parent() {
                std::fs::create_dir_all(folder)?;
            }
            std::fs::write(file, bytes)
        })
        .await
        .map_err(std::io::Error::other)?
    }
}

/// A destination that does not exist, or an empty folder.
fn empty_destination(dir: &Path) -> Result<(), Failure> {
    let refused =
        |why: String| Failure::config(format!("cannot export into {}: {why}", dir.display()));
    match std::fs::read_dir(dir) {
        Ok(entries) => match entries.count() {
            0 => Ok(()),
            _ => Err(refused("it is not empty".into())),
        },
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).map_err(|error| refused(error.to_string()))
        }
        Err(error) => Err(refused(error.to_string())),
    }
}

pub(crate) async fn export(
    settings: &RepositoryFileSettings,
    name: &str,
    dir: &Path,
) -> Result<String, Failure> {
    let repository = repository_named(name)?;
    empty_destination(dir)?;
    let store = storage::open(&settings.storage).await?;
    storage::prepare_schema(&store, false).await?;
    let shared: Arc<dyn Storage> = Arc::new(store);
    let metrics = Arc::new(Metrics::new(VERSION));
    let (documents, media) = services(shared, &WriterFence::default(), settings, metrics);
    let reading = |error| Failure::store("cannot read the repository", error);
    if documents
        .repositories()
        .repository(&repository)
        .await
        .map_err(reading)?
        .is_none()
    {
        return Err(Failure::config(format!(
            "there is no repository {repository}"
        )));
    }
    let manifest = repository_files::manifest_of(&documents, &media, &repository)
        .await
        .map_err(reading)?;
    let bar = documents_bar(manifest.documents.len(), "exporting");
    let mut sink = FolderSink {
        root: dir.to_owned(),
    };
    let report = repository_files::write_files(&documents, &media, &manifest, &mut sink, |_| {
        bar.inc(1);
    })
    .await
    .map_err(|error| Failure::runtime(format!("the export stopped: {error}")).with_source(error))?;
    bar.finish_and_clear();
    Ok(format!(
        "exported {} documents and {} images of {repository} to {} ({} bytes)\n",
        report.documents,
        report.images,
        dir.display(),
        report.bytes
    ))
}

pub(crate) async fn import(
    settings: &RepositoryFileSettings,
    dir: &Path,
    name: &str,
) -> Result<String, Failure> {
    let repository = repository_named(name)?;
    let limits = input::Limits {
        document_bytes: settings.collab.max_document_bytes,
        image_bytes: settings.media.max_stored_image_bytes,
    };
    let folder = dir.to_owned();
    let incoming = tokio::task::spawn_blocking(move || input::read(&folder, limits))
        .await
        .map_err(|error| Failure::runtime(format!("reading the folder failed: {error}")))??;

    let (fence, store) =
        storage::open_fenced(&settings.storage, settings.lease.database_wait(), true).await?;
    let shared: Arc<dyn Storage> = Arc::new(store.clone());
    let metrics = Arc::new(Metrics::new(VERSION));
    let (documents, media) = services(Arc::clone(&shared), &fence, settings, Arc::clone(&metrics));
    let work = async {
        ensure_repository(&shared, &documents, &repository).await?;
        let bar = documents_bar(incoming.documents.len(), "importing");
        let applied =
            import::apply(&documents, &media, &repository, &incoming, |_| bar.inc(1)).await;
        bar.finish_and_clear();
        // Every room checkpoints and closes, and its history is written, while the lease is
        // still held.
        documents.rooms().shutdown("the import ended").await;
        documents.rooms().recordings_written().await;
        applied
    };
    let report = writer::under_lease(&store, &fence, settings.lease, metrics, work).await?;
    let mut out = format!(
        "imported {} into {repository}: {} created, {} updated, {} unchanged, {} images stored\n",
        dir.display(),
        report.created,
        report.updated,
        report.unchanged,
        report.images
    );
    for skipped in &incoming.skipped {
        out.push_str(&format!("skipped {skipped}\n"));
    }
    for warning in &report.warnings {
        out.push_str(&format!("note: {warning}\n"));
    }
    Ok(out)
}

/// Creates the repository when it does not exist, with the user its owner names as its admin.
async fn ensure_repository(
    shared: &Arc<dyn Storage>,
    documents: &Documents,
    repository: &Repository,
) -> Result<(), Failure> {
    let failed = |error| Failure::store("cannot create the repository", error);
    let repositories = documents.repositories();
    if repositories
        .repository(repository)
        .await
        .map_err(failed)?
        .is_some()
    {
        return Ok(());
    }
    let (owner, _) = repository.owner_and_name().unwrap_or_default();
    let user = match UserName::new(owner) {
        Ok(name) => shared.users().user_by_name(&name).await.map_err(failed)?,
        Err(_) => None,
    }
    .ok_or_else(|| {
        Failure::config(format!(
            "there is no repository {repository}, and no user `{owner}` to create it for"
        ))
    })?;
    repositories
        .create(&user, repository)
        .await
        .map_err(failed)?;
    Ok(())
}
