//! Reading a folder for `fermata import`, all of it checked before anything is written: a
//! folder with a manifest (`fermata export`'s), or a plain folder of Markdown files. Runs on the
//! blocking pool. The rules for a plain folder (titles, slugs, one level of children) are in
//! docs/documents.md, "Export and import".

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use fermata_collab::repository_files::manifest::{
    IMAGES_SUFFIX, MANIFEST_FILE, Manifest, ManifestDocument, checked_parts,
};
use fermata_store::channel::check_title;
use fermata_store::{ChannelId, ImageHash, Slug};

use crate::failure::Failure;

/// The largest manifest read.
const MAX_MANIFEST_BYTES: u64 = 64 << 20;

/// The most each file may hold: the document and image limits of the configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) document_bytes: usize,
    pub(crate) image_bytes: usize,
}

/// Everything an import writes, checked.
#[derive(Debug)]
pub(crate) struct Incoming {
    pub(crate) documents: Vec<IncomingDocument>,
    /// Files left out of a plain folder, with why.
    pub(crate) skipped: Vec<String>,
}

/// One document to import; parents come before their children.
#[derive(Debug)]
pub(crate) struct IncomingDocument {
    /// Its ID in the manifest; none in a plain folder.
    pub(crate) exported_id: Option<ChannelId>,
    pub(crate) title: String,
    pub(crate) slug: Slug,
    pub(crate) former_slugs: Vec<Slug>,
    pub(crate) archived: bool,
    /// The index of its parent in [`Incoming::documents`].
    pub(crate) parent: Option<usize>,
    /// Where it was read from, relative to the folder, for messages.
    pub(crate) path: String,
    pub(crate) text: String,
    pub(crate) images: Vec<IncomingImage>,
}

impl IncomingDocument {
    /// Every slug it must hold, former ones first, the canonical one last.
    pub(crate) fn all_slugs(&self) -> impl Iterator<Item = &Slug> {
        self.former_slugs.iter().chain(std::iter::once(&self.slug))
    }
}

/// An image file, its hash checked against the manifest.
#[derive(Debug)]
pub(crate) struct IncomingImage {
    pub(crate) sha256: ImageHash,
    pub(crate) file: PathBuf,
}

/// Reads and checks `dir`: by its manifest when it has one, as a plain folder otherwise.
pub(crate) fn read(dir: &Path, limits: Limits) -> Result<Incoming, Failure> {
    let root = dir
        .canonicalize()
        .map_err(|error| Failure::config(format!("cannot read {}: {error}", dir.display())))?;
    let manifest = root.join(MANIFEST_FILE);
    if manifest.exists() {
        read_manifest(&root, &manifest, limits)
    } else {
        read_plain(&root, limits)
    }
}

fn invalid(path: &str, what: impl std::fmt::Display) -> Failure {
    Failure::config(format!("{path}: {what}"))
}

/// The file `path` names inside `root`, refused when it leaves the folder (through `..` or a
/// symbolic link) or is larger than `limit`.
fn inside(root: &Path, path: &str, limit: usize) -> Result<PathBuf, Failure> {
    let parts = checked_parts(path).map_err(|error| Failure::config(error.to_string()))?;
    let file = parts.iter().fold(root.to_owned(), |at, part| at.join(part));
    let real = file
        .canonicalize()
        .map_err(|error| invalid(path, format!("cannot read it: {error}")))?;
    if !real.starts_with(root) {
        return Err(Failure::config(format!(
            "the path `{path}` leads outside the folder"
        )));
    }
    let size = real
        .metadata()
        .map_err(|error| invalid(path, format!("cannot read it: {error}")))?
        .len();
    if size > limit as u64 {
        return Err(invalid(
            path,
            format!("{size} bytes, over the {limit} bytes this server keeps"),
        ));
    }
    Ok(real)
}

fn read_text(root: &Path, path: &str, limits: Limits) -> Result<String, Failure> {
    let file = inside(root, path, limits.document_bytes)?;
    let bytes =
        std::fs::read(&file).map_err(|error| invalid(path, format!("cannot read it: {error}")))?;
    let text = String::from_utf8(bytes).map_err(|_| invalid(path, "not UTF-8 text"))?;
    fermata_collab::check_text(&text).map_err(|refused| invalid(path, refused.to_string()))?;
    Ok(text)
}

fn slug(path: &str, text: &str) -> Result<Slug, Failure> {
    Slug::new(text).map_err(|error| invalid(path, format!("slug `{text}`: {error}")))
}

fn read_manifest(root: &Path, file: &Path, limits: Limits) -> Result<Incoming, Failure> {
    let size = file.metadata().map(|m| m.len()).unwrap_or_default();
    if size > MAX_MANIFEST_BYTES {
        return Err(invalid(MANIFEST_FILE, "larger than a manifest may be"));
    }
    let text = std::fs::read_to_string(file)
        .map_err(|error| invalid(MANIFEST_FILE, format!("cannot read it: {error}")))?;
    let manifest: Manifest = serde_json::from_str(&text)
        .map_err(|error| invalid(MANIFEST_FILE, format!("not a manifest: {error}")))?;
    if !manifest.is_readable() {
        return Err(invalid(
            MANIFEST_FILE,
            format!(
                "format `{}` version {} is not one this release reads (`{}` version {})",
                manifest.format,
                manifest.version,
                fermata_collab::repository_files::manifest::FORMAT,
                fermata_collab::repository_files::manifest::VERSION,
            ),
        ));
    }
    let mut ids: BTreeMap<String, usize> = BTreeMap::new();
    let mut slugs = HashSet::new();
    let mut documents = Vec::with_capacity(manifest.documents.len());
    for entry in &manifest.documents {
        let document = manifest_document(root, entry, &ids, &documents, limits)?;
        for slug in document.all_slugs() {
            if !slugs.insert(slug.clone()) {
                return Err(invalid(
                    &entry.path,
                    format!("slug `{slug}` is given twice"),
                ));
            }
        }
        if ids.insert(entry.id.clone(), documents.len()).is_some() {
            return Err(invalid(
                &entry.path,
                format!("document ID {} is given twice", entry.id),
            ));
        }
        documents.push(document);
    }
    Ok(Incoming {
        documents,
        skipped: Vec::new(),
    })
}

fn manifest_document(
    root: &Path,
    entry: &ManifestDocument,
    ids: &BTreeMap<String, usize>,
    earlier: &[IncomingDocument],
    limits: Limits,
) -> Result<IncomingDocument, Failure> {
    let path = entry.path.as_str();
    let id = ChannelId::parse(&entry.id).map_err(|error| invalid(path, error))?;
    check_title(&entry.title).map_err(|error| invalid(path, error))?;
    if !path.ends_with(".md") {
        return Err(invalid(path, "a document's file ends in .md"));
    }
    let parent = match &entry.parent {
        None => None,
        Some(parent) => {
            let index = *ids.get(parent).ok_or_else(|| {
                invalid(path, format!("its parent {parent} is not listed before it"))
            })?;
            if earlier[index].parent.is_some() {
                return Err(invalid(
                    path,
                    "its parent is itself a child (one level only)",
                ));
            }
            Some(index)
        }
    };
    let mut images = Vec::with_capacity(entry.images.len());
    for image in &entry.images {
        let sha256 =
            ImageHash::parse(&image.sha256).map_err(|error| invalid(&image.path, error))?;
        let file = inside(root, &image.path, limits.image_bytes)?;
        let bytes = std::fs::read(&file)
            .map_err(|error| invalid(&image.path, format!("cannot read it: {error}")))?;
        if ImageHash::of(&bytes) != sha256 {
            return Err(invalid(
                &image.path,
                "its bytes do not match its hash in the manifest",
            ));
        }
        images.push(IncomingImage { sha256, file });
    }
    Ok(IncomingDocument {
        exported_id: Some(id),
        title: entry.title.clone(),
        slug: slug(path, &entry.slug)?,
        former_slugs: entry
            .former_slugs
            .iter()
            .map(|text| slug(path, text))
            .collect::<Result<_, _>>()?,
        archived: entry.archived,
        parent,
        path: path.to_owned(),
        text: read_text(root, path, limits)?,
        images,
    })
}

/// A folder's entries, sorted by name, without hidden ones.
fn entries(dir: &Path, relative: &str) -> Result<Vec<(String, std::fs::FileType)>, Failure> {
    let listing = std::fs::read_dir(dir)
        .map_err(|error| invalid(relative, format!("cannot list it: {error}")))?;
    let mut found = Vec::new();
    for entry in listing {
        let entry = entry.map_err(|error| invalid(relative, format!("cannot list it: {error}")))?;
        let kind = entry
            .file_type()
            .map_err(|error| invalid(relative, format!("cannot list it: {error}")))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with('.') {
            found.push((name, kind));
        }
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(found)
}

/// A plain folder: each `*.md` a document; a subfolder's `*.md` the children of the top-level
/// document of the same name (top-level documents where there is none); deeper folders, other
/// files and symbolic links skipped and listed.
fn read_plain(root: &Path, limits: Limits) -> Result<Incoming, Failure> {
    let mut documents: Vec<IncomingDocument> = Vec::new();
    let mut skipped = Vec::new();
    let mut folders = Vec::new();
    for (name, kind) in entries(root, ".")? {
        if kind.is_dir() && !name.ends_with(IMAGES_SUFFIX) {
            folders.push(name);
        } else if kind.is_file() && name.ends_with(".md") {
            documents.push(plain_document(root, &name, None, limits)?);
        } else {
            skipped.push(format!("{name} (not a Markdown file)"));
        }
    }
    for folder in folders {
        let parent = documents.iter().position(|d| {
            d.parent.is_none() && d.path.strip_suffix(".md") == Some(folder.as_str())
        });
        for (name, kind) in entries(&root.join(&folder), &folder)? {
            let path = format!("{folder}/{name}");
            if kind.is_file() && name.ends_with(".md") {
                documents.push(plain_document(root, &path, parent, limits)?);
            } else if kind.is_dir() {
                skipped.push(format!("{path}/ (documents have one level of children)"));
            } else {
                skipped.push(format!("{path} (not a Markdown file)"));
            }
        }
    }
    let mut seen: BTreeMap<&Slug, &str> = BTreeMap::new();
    for document in &documents {
        if let Some(first) = seen.insert(&document.slug, &document.path) {
            return Err(Failure::config(format!(
                "{first} and {} would both have the slug `{}`; rename one",
                document.path, document.slug
            )));
        }
    }
    Ok(Incoming { documents, skipped })
}

fn plain_document(
    root: &Path,
    path: &str,
    parent: Option<usize>,
    limits: Limits,
) -> Result<IncomingDocument, Failure> {
    let text = read_text(root, path, limits)?;
    let name = path.rsplit('/').next().unwrap_or(path);
    let stem = name.strip_suffix(".md").unwrap_or(name);
    let heading = text
        .lines()
        .find_map(|line| line.trim_start().strip_prefix("# "))
        .map(str::trim)
        .filter(|title| check_title(title).is_ok());
    let title = match heading {
        Some(title) => title.to_owned(),
        None if check_title(stem).is_ok() => stem.to_owned(),
        None => Slug::from_title(stem).as_str().to_owned(),
    };
    Ok(IncomingDocument {
        exported_id: None,
        title,
        slug: Slug::from_title(stem),
        former_slugs: Vec::new(),
        archived: false,
        parent,
        path: path.to_owned(),
        text,
        images: Vec::new(),
    })
}
