//! Writing a repository as files: the manifest first, then each document's canonical MDX, then
//! its images, one file at a time into an [`ExportSink`] (a folder, an archive), so memory holds
//! at most one document's text or one image at a time besides the manifest.
//!
//! Each document is read as it stands when its turn comes (from its open room, or recovered from
//! storage), not as one snapshot of the whole repository.

use std::collections::BTreeMap;
use std::future::Future;

use fermata_store::{Channel, ChannelId, ImageHash, Repository, StoreError};

use super::manifest::{Manifest, ManifestDocument, ManifestImage, document_path, image_path};
use crate::documents::Documents;
use crate::media::{Media, MediaFailure};

/// Where an export's files go.
pub trait ExportSink: Send {
    /// Writes one file at `path` (relative, `/`-separated, checked by the manifest's rules).
    fn put(
        &mut self,
        path: &str,
        bytes: Vec<u8>,
    ) -> impl Future<Output = std::io::Result<()>> + Send;
}

/// Why an export stopped.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the image {sha256} of document {document} could not be read")]
    Image {
        document: ChannelId,
        sha256: ImageHash,
        #[source]
        cause: Option<MediaFailure>,
    },
    #[error("writing the export failed")]
    Write(#[source] std::io::Error),
}

/// What an export wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExportReport {
    pub documents: usize,
    pub images: usize,
    /// The bytes of every file, the manifest included.
    pub bytes: u64,
}

/// The manifest of `repository` as it stands: every document, archived ones too, parents
/// before their children (each level by slug), with their slugs and images.
pub async fn manifest_of(
    documents: &Documents,
    media: &Media,
    repository: &Repository,
) -> Result<Manifest, StoreError> {
    let channels = documents.all_in(repository).await?;
    let slugs: BTreeMap<&ChannelId, &str> = channels
        .iter()
        .map(|channel| (&channel.id, channel.slug.as_str()))
        .collect();
    let mut ordered: Vec<&Channel> = channels.iter().filter(|c| c.parent.is_none()).collect();
    ordered.sort_by(|a, b| a.slug.cmp(&b.slug));
    let mut children: Vec<&Channel> = channels.iter().filter(|c| c.parent.is_some()).collect();
    children.sort_by(|a, b| a.slug.cmp(&b.slug));
    for child in children {
        // Under its parent, after the parent's earlier children.
        let parent = child.parent.as_ref();
        let at = ordered
            .iter()
            .rposition(|c| Some(&c.id) == parent || c.parent.as_ref() == parent)
            .map_or(ordered.len(), |i| i + 1);
        ordered.insert(at, child);
    }
    let mut listed = Vec::with_capacity(ordered.len());
    for channel in ordered {
        let parent_slug = channel
            .parent
            .as_ref()
            .and_then(|parent| slugs.get(parent).copied());
        let path = document_path(parent_slug, channel.slug.as_str());
        let former_slugs = documents
            .slugs(&channel.id)
            .await?
            .into_iter()
            .filter(|slug| *slug != channel.slug)
            .map(|slug| slug.as_str().to_owned())
            .collect();
        let images = media
            .images_of(&channel.id)
            .await?
            .into_iter()
            .map(|image| {
                let media_type = crate::media::media_type_of_image(image.image_type);
                ManifestImage {
                    path: image_path(&path, image.sha256.as_str(), media_type.as_str()),
                    sha256: image.sha256.as_str().to_owned(),
                    content_type: media_type.content_type().to_owned(),
                    size: u64::try_from(image.size).unwrap_or_default(),
                }
            })
            .collect();
        listed.push(ManifestDocument {
            id: channel.id.0.clone(),
            title: channel.title.clone(),
            slug: channel.slug.as_str().to_owned(),
            former_slugs,
            archived: channel.archived_at.is_some(),
            parent: channel.parent.as_ref().map(|parent| parent.0.clone()),
            path,
            images,
        });
    }
    Ok(Manifest::new(repository.as_str(), listed))
}

/// Writes `manifest` and every file it names into `sink`, calling `written` after each
/// document (with its images) is out.
pub async fn write_files<S: ExportSink>(
    documents: &Documents,
    media: &Media,
    manifest: &Manifest,
    sink: &mut S,
    mut written: impl FnMut(&ManifestDocument) + Send,
) -> Result<ExportReport, ExportError> {
    let mut report = ExportReport::default();
    let text = serde_json::to_vec_pretty(manifest)
        .map_err(|error| ExportError::Write(std::io::Error::other(error)))?;
    report.bytes += text.len() as u64;
    sink.put(super::manifest::MANIFEST_FILE, text)
        .await
        .map_err(ExportError::Write)?;
    for document in &manifest.documents {
        let id = ChannelId(document.id.clone());
        let view = documents.read(&id).await?;
        report.bytes += view.text.len() as u64;
        sink.put(&document.path, view.text.into_bytes())
            .await
            .map_err(ExportError::Write)?;
        for image in &document.images {
            let sha256 = ImageHash::parse(&image.sha256)?;
            let failed = |cause| ExportError::Image {
                document: id.clone(),
                sha256: sha256.clone(),
                cause,
            };
            let file = media
                .image(&id, &sha256, None)
                .await
                .map_err(|cause| failed(Some(cause)))?
                .ok_or_else(|| failed(None))?;
            report.bytes += file.bytes.len() as u64;
            sink.put(&image.path, file.bytes)
                .await
                .map_err(ExportError::Write)?;
            report.images += 1;
        }
        report.documents += 1;
        written(document);
    }
    Ok(report)
}
