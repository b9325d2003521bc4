//! Applying a checked folder to a repository, under the writer lease, through the documents
//! and media services (every change a fenced commit through the document's room, as the API
//! makes it). Each incoming document is matched to one already there (by its exported ID, the
//! ID an earlier import gave it, or any of its slugs), or created; then what differs is changed
//! and the rest left alone, so running it again changes nothing. The rules are in
//! docs/documents.md, "Export and import".

use std::collections::{BTreeMap, HashMap};

use fermata_collab::{Documents, ImageSource, Media};
use fermata_store::{Channel, ChannelId, CreationKey, Repository, Slug, StoreError};

use super::input::{Incoming, IncomingDocument};
use crate::failure::Failure;

/// Who stored the images an import brings, as the image rows record it.
const STORED_BY: &str = "fermata import";

/// What an import did.
#[derive(Debug, Default)]
pub(crate) struct ImportReport {
    pub(crate) created: usize,
    pub(crate) updated: usize,
    pub(crate) unchanged: usize,
    pub(crate) images: usize,
    /// What could not be made exactly as given, for the operator.
    pub(crate) warnings: Vec<String>,
}

fn store(doing: &str, path: &str, error: StoreError) -> Failure {
    Failure::store(&format!("{path}: {doing}"), error)
}

/// The ID an import gives a document whose exported ID is taken elsewhere: the same on every
/// run, so the next run finds it.
fn derived_id(repository: &Repository, exported: &ChannelId) -> Option<ChannelId> {
    let key = CreationKey::new(format!("fermata-import:{exported}")).ok()?;
    Some(ChannelId::for_creation_key(repository, &key))
}

/// The documents already in the repository and who holds each slug there.
struct Present {
    channels: HashMap<ChannelId, Channel>,
    slugs: HashMap<Slug, ChannelId>,
}

async fn present(documents: &Documents, repository: &Repository) -> Result<Present, Failure> {
    let reading = |error| Failure::store("cannot read the repository", error);
    let mut slugs = HashMap::new();
    let mut channels = HashMap::new();
    for channel in documents.all_in(repository).await.map_err(reading)? {
        for slug in documents.slugs(&channel.id).await.map_err(reading)? {
            slugs.insert(slug, channel.id.clone());
        }
        channels.insert(channel.id.clone(), channel);
    }
    Ok(Present { channels, slugs })
}

/// The document already there each incoming one is, checked before anything is written: no
/// slug may belong to a document another incoming one (or none) is.
fn matches(
    repository: &Repository,
    incoming: &Incoming,
    present: &Present,
) -> Result<Vec<Option<ChannelId>>, Failure> {
    let mut found = Vec::with_capacity(incoming.documents.len());
    let mut taken: BTreeMap<ChannelId, &str> = BTreeMap::new();
    for document in &incoming.documents {
        let by_id = document.exported_id.iter().flat_map(|id| {
            [Some(id.clone()), derived_id(repository, id)]
                .into_iter()
                .flatten()
        });
        let by_slug = document
            .all_slugs()
            .filter_map(|slug| present.slugs.get(slug).cloned());
        let target = by_id
            .filter(|id| present.channels.contains_key(id))
            .chain(by_slug)
            .next();
        for slug in document.all_slugs() {
            if let Some(holder) = present.slugs.get(slug)
                && Some(holder) != target.as_ref()
            {
                return Err(Failure::config(format!(
                    "{}: the slug `{slug}` belongs to another document of {repository} (`{}`); \
                     nothing was imported",
                    document.path, present.channels[holder].title
                )));
            }
        }
        if let Some(target) = &target
            && let Some(first) = taken.insert(target.clone(), &document.path)
        {
            return Err(Failure::config(format!(
                "{first} and {} both match the document {target} of {repository}; nothing was \
                 imported",
                document.path
            )));
        }
        found.push(target);
    }
    Ok(found)
}

/// Applies `incoming` to `repository`, calling `done` after each document.
pub(crate) async fn apply(
    documents: &Documents,
    media: &Media,
    repository: &Repository,
    incoming: &Incoming,
    mut done: impl FnMut(&IncomingDocument),
) -> Result<ImportReport, Failure> {
    let present = present(documents, repository).await?;
    let matched = matches(repository, incoming, &present)?;
    let mut report = ImportReport::default();
    let mut ids: Vec<ChannelId> = Vec::with_capacity(matched.len());
    let mut changed = vec![false; matched.len()];

    // Created (parents first) or found; then every document holds each of its slugs, before any
    // takes its title, so a title's slug chosen among them finds the others taken as they were.
    for (index, document) in incoming.documents.iter().enumerate() {
        let id = match &matched[index] {
            Some(id) => id.clone(),
            None => {
                let id = new_id(documents, repository, document).await?;
                let first = document.all_slugs().next().unwrap_or(&document.slug);
                let parent = document.parent.map(|parent| ids[parent].clone());
                documents
                    .create_at(id, repository.clone(), first.as_str().to_owned(), parent)
                    .await
                    .map_err(|error| store("cannot create it", &document.path, error))?
                    .id
            }
        };
        if let (Some(channel), Some(parent)) = (present.channels.get(&id), document.parent)
            && channel.parent.as_ref() != Some(&ids[parent])
        {
            report.warnings.push(format!(
                "{}: already in {repository} under another parent; left there",
                document.path
            ));
        }
        let held = documents
            .slugs(&id)
            .await
            .map_err(|error| store("cannot read its slugs", &document.path, error))?;
        for slug in document.all_slugs().filter(|slug| !held.contains(slug)) {
            unarchive(documents, &id, &document.path).await?;
            rename(documents, &id, slug.as_str(), &document.path).await?;
            changed[index] = true;
        }
        ids.push(id);
    }

    let moved = moved_addresses(incoming, &ids);
    for (index, document) in incoming.documents.iter().enumerate() {
        let id = &ids[index];
        let text = moved
            .iter()
            .fold(document.text.clone(), |text, (from, to)| {
                text.replace(from, to)
            });
        let view = documents
            .read(id)
            .await
            .map_err(|error| store("cannot read it", &document.path, error))?;
        if view.text != text {
            unarchive(documents, id, &document.path).await?;
            documents
                .rewrite(id, text, None)
                .await
                .map_err(|error| store("cannot write its text", &document.path, error))?;
            changed[index] = true;
        }
        let channel = view.channel;
        let slug = if channel.title == document.title {
            channel.slug
        } else {
            unarchive(documents, id, &document.path).await?;
            changed[index] = true;
            rename(documents, id, &document.title, &document.path)
                .await?
                .slug
        };
        if slug != document.slug {
            report.warnings.push(format!(
                "{}: its title makes the slug `{slug}` here (`{}` still resolves to it)",
                document.path, document.slug
            ));
        }
        let stored = images(media, id, document).await?;
        report.images += stored;
        changed[index] |= stored > 0;
        let archived = documents
            .channel(id)
            .await
            .map_err(|error| store("cannot read it", &document.path, error))?
            .archived_at
            .is_some();
        if archived != document.archived {
            let result = if document.archived {
                documents.archive(id).await
            } else {
                documents.restore(id).await
            };
            result.map_err(|error| store("cannot archive or restore it", &document.path, error))?;
            changed[index] = true;
        }
        documents.rooms().close(id, "imported").await;
        match (&matched[index], changed[index]) {
            (None, _) => report.created += 1,
            (Some(_), true) => report.updated += 1,
            (Some(_), false) => report.unchanged += 1,
        }
        done(document);
    }
    Ok(report)
}

/// The ID a new document gets: its exported one where that is free, the derived one otherwise;
/// a random one for a plain folder's.
async fn new_id(
    documents: &Documents,
    repository: &Repository,
    document: &IncomingDocument,
) -> Result<ChannelId, Failure> {
    let Some(exported) = &document.exported_id else {
        return Ok(ChannelId::random());
    };
    let free = documents
        .find(exported)
        .await
        .map_err(|error| store("cannot look its ID up", &document.path, error))?
        .is_none();
    Ok(if free {
        exported.clone()
    } else {
        derived_id(repository, exported).unwrap_or_else(ChannelId::random)
    })
}

/// The image addresses to rewrite in the texts: each exported document's that now has
/// another ID.
fn moved_addresses(incoming: &Incoming, ids: &[ChannelId]) -> Vec<(String, String)> {
    incoming
        .documents
        .iter()
        .zip(ids)
        .filter_map(|(document, id)| {
            let exported = document.exported_id.as_ref().filter(|old| *old != id)?;
            Some((
                format!("/api/v1/documents/{exported}/images/"),
                format!("/api/v1/documents/{id}/images/"),
            ))
        })
        .collect()
}

/// Renames through the document's room (a fenced commit with the title and its slug).
async fn rename(
    documents: &Documents,
    id: &ChannelId,
    title: &str,
    path: &str,
) -> Result<Channel, Failure> {
    documents
        .rename(id, title.to_owned(), None)
        .await
        .map_err(|error| {
            Failure::runtime(format!("{path}: cannot rename it: {error}")).with_source(error)
        })
}

/// Restores an archived document so that its room may change it; the import archives it again
/// at the end when the folder says so.
async fn unarchive(documents: &Documents, id: &ChannelId, path: &str) -> Result<(), Failure> {
    let channel = documents
        .channel(id)
        .await
        .map_err(|error| store("cannot read it", path, error))?;
    if channel.archived_at.is_some() {
        documents
            .restore(id)
            .await
            .map_err(|error| store("cannot restore it", path, error))?;
    }
    Ok(())
}

/// Stores the images the document does not hold yet; how many were stored.
async fn images(
    media: &Media,
    id: &ChannelId,
    document: &IncomingDocument,
) -> Result<usize, Failure> {
    let held: Vec<_> = media
        .images_of(id)
        .await
        .map_err(|error| store("cannot list its images", &document.path, error))?
        .into_iter()
        .map(|image| image.sha256)
        .collect();
    let mut stored = 0;
    for image in document
        .images
        .iter()
        .filter(|image| !held.contains(&image.sha256))
    {
        let file = image.file.clone();
        let bytes = tokio::task::spawn_blocking(move || std::fs::read(file))
            .await
            .map_err(|error| Failure::runtime(format!("reading an image failed: {error}")))?
            .map_err(|error| {
                Failure::runtime(format!("{}: cannot read an image: {error}", document.path))
            })?;
        let result = media
            .store_image(id, ImageSource::Tool, STORED_BY.to_owned(), bytes)
            .await
            .map_err(|error| {
                Failure::runtime(format!(
                    "{}: the image {} was refused: {error}",
                    document.path, image.sha256
                ))
                .with_source(error)
            })?;
        if result.stored.info.sha256 != image.sha256 {
            return Err(Failure::runtime(format!(
                "{}: the image {} was stored as another copy",
                document.path, image.sha256
            )));
        }
        stored += 1;
    }
    Ok(stored)
}
