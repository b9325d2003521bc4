//! The encrypted review artifact: one per operation, holding every successful candidate file and
//! the canonical manifest, sealed with the keyring and kept in an object store until the review
//! decision.
//!
//! Writing: the files and manifest become a deterministic, compressed tar archive ([`archive`]; the format is
//! described in its module), which the keyring seals under its current key with AES-256-GCM and a
//! fresh random 96-bit nonce. The authenticated data binds the key version, the purpose
//! ([`Purpose::SchemaReviewArtifact`]) and the operation ID, so an artifact moved to another
//! operation, or relabelled with another key version, does not open. The object store receives
//! the ciphertext alone, at a location derived only from the operation ID
//! ([`artifact_location`]), so a retried step overwrites its own object and nothing else. The
//! artifact row ([`NewArtifact`]) receives the rest: key version, nonce (IV), authentication tag,
//! the ciphertext's SHA-256, the manifest, the decision expiry and the location. Neither half opens
//! without the other, and the row never holds a file's path or contents.
//!
//! Between a refresh's database steps and its artifact step, each changed database's verified
//! candidate waits in the object store as a *staged candidate* ([`ArtifactStore::stage`]): the
//! same archive format, sealed whole (envelope and all) under the same purpose with
//! `<operation ID>/candidate/<position>` as the authenticated row, at
//! [`staged_location`]. Only the artifact step reads them, and it deletes them once the artifact
//! row is recorded. Nothing of a candidate is ever written in plaintext outside a step's own
//! temporary folder. Its review notes (migration scripts and lint findings, JSON) wait beside it,
//! sealed whole with `<operation ID>/notes/<position>` as the authenticated row, at
//! [`staged_notes_location`]; the artifact step archives them as the artifact's notes and deletes
//! them with the candidate.
//!
//! A verification's drift diffs are sealed the same way ([`drift`]'s module); both go through
//! [`ArtifactStore::put_sealed`] and [`ArtifactStore::get_sealed`], which compress what they seal
//! as one LZ4 frame and read what was sealed before without it.
//!
//! Reading checks everything before returning anything: the location is the operation's, the
//! stored bytes hash to the recorded hash, the envelope opens with the recorded key version (older
//! versions stay loaded after a rotation), the archive has the fixed layout, and its manifest is
//! the row's. Every failure is the one safe error `ARTIFACT_UNAVAILABLE`, whose cause (the action
//! and the object store's, the keyring's or the archive's error, or a fixed reason) is for the
//! log of whoever handles it; no content of an artifact gets into either.

mod archive;
mod drift;

use std::collections::BTreeMap;
use std::sync::Arc;

use fermata_accounts::KeyringHandle;
use fermata_crypto::{Aad, NONCE_LEN, Purpose, TAG_LEN};
use fermata_schema_core::{ErrorCode, SafeError};
use fermata_store::schema::{CleanupResult, NewArtifact, OperationId};
use fermata_store::{ErrorChain, UnixMillis};
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

use crate::safe_context::{SafeCode, because};

pub use archive::{ArtifactContents, archive, archive_with_notes};
pub use drift::{DRIFT_FOLDER, drift_location};

/// A database's candidate sealed for staging: where it goes, and its envelope.
pub struct SealedCandidate {
    location: String,
    envelope: Vec<u8>,
}

impl SealedCandidate {
    /// The envelope's length in bytes.
    pub fn envelope_bytes(&self) -> usize {
        self.envelope.len()
    }
}

impl std::fmt::Debug for SealedCandidate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SealedCandidate")
            .field("location", &self.location)
            .field("envelope_bytes", &self.envelope.len())
            .finish()
    }
}

/// The object store folder that holds review artifacts.
pub const ARTIFACT_FOLDER: &str = "schema-artifacts";

/// The keyring's envelope layout (see `fermata_crypto`): `[format][key version, 4 bytes
/// big-endian][nonce, 12 bytes][ciphertext][tag, 16 bytes]`. The artifact keeps the nonce and tag
/// in its row and the ciphertext in the object store, and joins them again to open it.
const ENVELOPE_FORMAT: u8 = 1;
const VERSION_LEN: usize = 4;
const HEADER_LEN: usize = 1 + VERSION_LEN + NONCE_LEN;

/// Where an operation's artifact is kept: `schema-artifacts/<operation ID>.bin`. It depends on the
/// operation ID alone, so writing it again replaces only that operation's artifact.
pub fn artifact_location(operation: OperationId) -> String {
    format!("{ARTIFACT_FOLDER}/{operation}.bin")
}

/// Where the candidate of the database at `position` in `operation`'s selection waits for the
/// artifact step: `schema-artifacts/<operation ID>/candidate-<position>.bin`.
pub fn staged_location(operation: OperationId, position: u32) -> String {
    format!("{ARTIFACT_FOLDER}/{operation}/candidate-{position}.bin")
}

/// Where the review notes of the candidate at `position` wait for the artifact step:
/// `schema-artifacts/<operation ID>/notes-<position>.bin`.
pub fn staged_notes_location(operation: OperationId, position: u32) -> String {
    format!("{ARTIFACT_FOLDER}/{operation}/notes-{position}.bin")
}

/// An S3-compatible bucket for review artifacts (`[schema.artifacts]`). `Debug` never shows the
/// secret key.
#[derive(Clone)]
pub struct S3Settings {
    /// The service's URL (`https://s3.eu-west-1.amazonaws.com`, or a MinIO, Ceph or R2 address).
    pub endpoint: String,
    pub bucket: String,
    pub region: String,
    pub access_key_id: String,
    pub secret_access_key: zeroize::Zeroizing<String>,
}

impl std::fmt::Debug for S3Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Settings")
            .field("endpoint", &self.endpoint)
            .field("bucket", &self.bucket)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .finish()
    }
}

/// Writes, reads and deletes review artifacts in an object store.
#[derive(Debug, Clone)]
pub struct ArtifactStore {
    /// Where ciphertexts are kept: a local folder by default, any `object_store` backend (S3)
    /// where configured.
    objects: Arc<dyn ObjectStore>,
    /// The process's keyring; its current key seals, every loaded version opens.
    keys: Arc<KeyringHandle>,
}

impl ArtifactStore {
    pub fn new(objects: Arc<dyn ObjectStore>, keys: Arc<KeyringHandle>) -> Self {
        ArtifactStore { objects, keys }
    }

    /// Artifacts in the folder `root` (created if missing), written with `fsync` so a stored
    /// artifact survives a crash as the row that names it does; deleting the last object of a
    /// folder (an operation's staged candidates) removes the emptied folders too. Blocks while it
    /// creates the folder.
    pub fn local(root: &std::path::Path, keys: Arc<KeyringHandle>) -> Result<Self, SafeError> {
        std::fs::create_dir_all(root).or_code(
            ErrorCode::ArtifactUnavailable,
            "create the review artifact folder",
        )?;
        let objects = LocalFileSystem::new_with_prefix(root)
            .or_code(
                ErrorCode::ArtifactUnavailable,
                "use the review artifact folder",
            )?
            .with_fsync(true)
            .with_automatic_cleanup(true);
        Ok(ArtifactStore::new(Arc::new(objects), keys))
    }

    /// Artifacts in an S3-compatible bucket, addressed by path (`endpoint/bucket/key`), as
    /// MinIO and most compatible services expect. Plain `http://` is allowed only for a loopback
    /// endpoint.
    pub fn s3(settings: &S3Settings, keys: Arc<KeyringHandle>) -> Result<Self, SafeError> {
        let loopback = ["http://127.0.0.1", "http://localhost", "http://[::1]"]
            .iter()
            .any(|prefix| settings.endpoint.starts_with(prefix));
        let objects = object_store::aws::AmazonS3Builder::new()
            .with_endpoint(&settings.endpoint)
            .with_bucket_name(&settings.bucket)
            .with_region(&settings.region)
            .with_access_key_id(&settings.access_key_id)
            .with_secret_access_key(settings.secret_access_key.as_str())
            .with_virtual_hosted_style_request(false)
            .with_allow_http(loopback)
            .build()
            // Dropped on purpose: the builder's error can quote the endpoint as configured,
            // credentials and all.
            .map_err(|_| {
                because(
                    ErrorCode::ArtifactUnavailable,
                    "the review artifact bucket settings cannot be used",
                )
            })?;
        Ok(ArtifactStore::new(Arc::new(objects), keys))
    }

    /// Seals `files`, `notes` and `manifest` into `operation`'s artifact, writes it (replacing an
    /// earlier attempt's), and returns the row to record. `decision_expires_at` is when the review
    /// window closes.
    pub async fn store(
        &self,
        operation: OperationId,
        files: BTreeMap<String, Vec<u8>>,
        notes: BTreeMap<String, Vec<u8>>,
        manifest: String,
        decision_expires_at: UnixMillis,
    ) -> Result<NewArtifact, SafeError> {
        serde_json::from_str::<serde_json::Value>(&manifest)
            .or_code(ErrorCode::ArtifactUnavailable, "read the manifest as JSON")?;
        let started = std::time::Instant::now();
        let keys = Arc::clone(&self.keys);
        let archived_manifest = manifest.clone();
        let (ciphertext, sealed) = tokio::task::spawn_blocking(move || {
            let mut buffer = archive_with_notes(&files, &notes, &archived_manifest)?;
            drop((files, notes));
            let sealed = keys.seal_in_place(aad(&operation.to_string()), &mut buffer);
            Ok::<_, SafeError>((buffer, sealed))
        })
        .await
        .or_code(ErrorCode::ArtifactUnavailable, "seal the review artifact")??;

        let sealed_at = started.elapsed();
        let location = artifact_location(operation);
        let ciphertext_hash = sha256_hex(&ciphertext);
        let bytes = ciphertext.len();
        self.objects
            .put(
                &ObjectPath::from(location.as_str()),
                PutPayload::from(ciphertext),
            )
            .await
            .or_code(ErrorCode::ArtifactUnavailable, "write the review artifact")?;
        tracing::info!(
            operation = %operation,
            key_version = sealed.key_version,
            bytes,
            sealed_ms = sealed_at.as_millis(),
            written_ms = (started.elapsed() - sealed_at).as_millis(),
            "review artifact stored"
        );
        Ok(NewArtifact {
            operation,
            blob_locator: location.clone(),
            key_version: sealed.key_version,
            iv: sealed.nonce.to_vec(),
            auth_tag: sealed.tag.to_vec(),
            ciphertext_hash,
            manifest,
            decision_expires_at,
            cleanup_target: location,
        })
    }

    /// Seals one database's candidate (its files as one archive, [`candidate_archive`]) for
    /// [`ArtifactStore::stage`], which writes it once the candidate is verified. Nothing is
    /// written here, so sealing can run while the candidate is still being verified.
    pub async fn seal_candidate(
        &self,
        operation: OperationId,
        position: u32,
        archive: Vec<u8>,
    ) -> Result<SealedCandidate, SafeError> {
        let keys = Arc::clone(&self.keys);
        let row = staged_row(operation, position);
        let envelope = tokio::task::spawn_blocking(move || keys.seal(aad(&row), &archive))
            .await
            .or_code(ErrorCode::ArtifactUnavailable, "seal a candidate")?;
        Ok(SealedCandidate {
            location: staged_location(operation, position),
            envelope,
        })
    }

    /// Writes a verified candidate, sealed by [`ArtifactStore::seal_candidate`], at
    /// [`staged_location`], replacing an earlier attempt's.
    pub async fn stage(&self, sealed: SealedCandidate) -> Result<(), SafeError> {
        self.objects
            .put(
                &ObjectPath::from(sealed.location.as_str()),
                PutPayload::from(sealed.envelope),
            )
            .await
            .or_code(ErrorCode::ArtifactUnavailable, "stage a candidate")?;
        Ok(())
    }

    /// The files of the candidate staged at `position`, checked and decrypted.
    pub async fn staged(
        &self,
        operation: OperationId,
        position: u32,
    ) -> Result<BTreeMap<String, Vec<u8>>, SafeError> {
        let envelope = self
            .objects
            .get(&ObjectPath::from(
                staged_location(operation, position).as_str(),
            ))
            .await
            .or_code(ErrorCode::ArtifactUnavailable, "fetch a staged candidate")?
            .bytes()
            .await
            .or_code(ErrorCode::ArtifactUnavailable, "fetch a staged candidate")?;
        let keys = Arc::clone(&self.keys);
        let row = staged_row(operation, position);
        tokio::task::spawn_blocking(move || {
            let plaintext = keys
                .open(aad(&row), &envelope)
                .or_code(ErrorCode::ArtifactUnavailable, "decrypt a staged candidate")?;
            Ok(archive::unarchive(&plaintext)?.files)
        })
        .await
        .or_code(ErrorCode::ArtifactUnavailable, "open a staged candidate")?
    }

    /// Seals the review notes of the candidate staged at `position` (its migration scripts and
    /// lint findings, as JSON) and writes them at [`staged_notes_location`], replacing an earlier
    /// attempt's.
    pub async fn stage_notes(
        &self,
        operation: OperationId,
        position: u32,
        notes: Vec<u8>,
    ) -> Result<(), SafeError> {
        self.put_sealed(
            &staged_notes_location(operation, position),
            staged_notes_row(operation, position),
            notes,
        )
        .await
    }

    /// The review notes staged at `position`, checked and decrypted (wiped when dropped); `None`
    /// when there are none (a candidate staged before notes were).
    pub async fn staged_notes(
        &self,
        operation: OperationId,
        position: u32,
    ) -> Result<Option<Zeroizing<Vec<u8>>>, SafeError> {
        self.get_sealed(
            &staged_notes_location(operation, position),
            staged_notes_row(operation, position),
        )
        .await
    }

    /// Seals `plaintext`, compressed as one LZ4 frame, whole (envelope and all) under the
    /// authenticated row `row` and writes it at `location`, replacing what was there: a staged
    /// note or a drift diff.
    pub(crate) async fn put_sealed(
        &self,
        location: &str,
        row: String,
        plaintext: Vec<u8>,
    ) -> Result<(), SafeError> {
        let keys = Arc::clone(&self.keys);
        let envelope = tokio::task::spawn_blocking(move || {
            Ok::<_, SafeError>(keys.seal(aad(&row), &archive::compressed(&plaintext)?))
        })
        .await
        .or_code(ErrorCode::ArtifactUnavailable, "seal an object")??;
        self.objects
            .put(&ObjectPath::from(location), PutPayload::from(envelope))
            .await
            .or_code(ErrorCode::ArtifactUnavailable, "write a sealed object")?;
        Ok(())
    }

    /// What [`ArtifactStore::put_sealed`] wrote at `location` under `row`, checked and
    /// decrypted (wiped when dropped); `None` when nothing is there (never written, or deleted).
    pub(crate) async fn get_sealed(
        &self,
        location: &str,
        row: String,
    ) -> Result<Option<Zeroizing<Vec<u8>>>, SafeError> {
        let envelope = match self.objects.get(&ObjectPath::from(location)).await {
            Ok(found) => found
                .bytes()
                .await
                .or_code(ErrorCode::ArtifactUnavailable, "fetch a sealed object")?,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(error) => {
                return Err(error).or_code(ErrorCode::ArtifactUnavailable, "fetch a sealed object");
            }
        };
        let keys = Arc::clone(&self.keys);
        tokio::task::spawn_blocking(move || {
            let frame = keys
                .open(aad(&row), &envelope)
                .or_code(ErrorCode::ArtifactUnavailable, "decrypt a sealed object")?;
            archive::expanded(frame)
        })
        .await
        .or_code(ErrorCode::ArtifactUnavailable, "open a sealed object")?
        .map(Some)
    }

    /// Deletes the staged candidate at `position` and its notes; what is already gone is fine.
    pub async fn discard_staged(&self, operation: OperationId, position: u32) {
        for location in [
            staged_location(operation, position),
            staged_notes_location(operation, position),
        ] {
            match self
                .objects
                .delete(&ObjectPath::from(location.as_str()))
                .await
            {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(error) => {
                    tracing::warn!(operation = %operation, position, error = %ErrorChain(&error), "a staged candidate or its notes could not be deleted");
                }
            }
        }
    }

    /// Fetches, checks and decrypts the artifact `artifact` describes.
    pub async fn open(&self, artifact: &NewArtifact) -> Result<ArtifactContents, SafeError> {
        let operation = artifact.operation;
        let location = artifact_location(operation);
        if artifact.blob_locator != location {
            return Err(because(
                ErrorCode::ArtifactUnavailable,
                "the artifact row names another operation's location",
            ));
        }
        if artifact.iv.len() != NONCE_LEN || artifact.auth_tag.len() != TAG_LEN {
            return Err(because(
                ErrorCode::ArtifactUnavailable,
                "the artifact row's nonce or tag has the wrong length",
            ));
        }
        let ciphertext = self
            .objects
            .get(&ObjectPath::from(location.as_str()))
            .await
            .or_code(ErrorCode::ArtifactUnavailable, "fetch the review artifact")?
            .bytes()
            .await
            .or_code(ErrorCode::ArtifactUnavailable, "fetch the review artifact")?;
        if sha256_hex(&ciphertext) != artifact.ciphertext_hash {
            return Err(because(
                ErrorCode::ArtifactUnavailable,
                "the review artifact does not match its hash",
            ));
        }

        let keys = Arc::clone(&self.keys);
        let envelope = join_envelope(
            artifact.key_version,
            &artifact.iv,
            &ciphertext,
            &artifact.auth_tag,
        );
        let contents = tokio::task::spawn_blocking(move || {
            let plaintext = keys.open(aad(&operation.to_string()), &envelope).or_code(
                ErrorCode::ArtifactUnavailable,
                "decrypt the review artifact",
            )?;
            archive::unarchive(&plaintext)
        })
        .await
        .or_code(ErrorCode::ArtifactUnavailable, "open the review artifact")??;
        if contents.manifest != artifact.manifest {
            return Err(because(
                ErrorCode::ArtifactUnavailable,
                "the review artifact's manifest is not the row's",
            ));
        }
        Ok(contents)
    }

    /// Deletes `operation`'s artifact. Deleting one that is already gone reports
    /// [`CleanupResult::AlreadyGone`], so cleanup can be repeated.
    pub async fn delete(&self, operation: OperationId) -> CleanupResult {
        let location = ObjectPath::from(artifact_location(operation).as_str());
        // Some stores (S3) report success for a missing object, so look before deleting.
        match self.objects.head(&location).await {
            Ok(_) => {}
            Err(object_store::Error::NotFound { .. }) => return CleanupResult::AlreadyGone,
            Err(error) => {
                tracing::warn!(operation = %operation, error = %ErrorChain(&error), "the review artifact could not be looked up for deletion");
                return CleanupResult::Failed;
            }
        }
        match self.objects.delete(&location).await {
            Ok(()) => CleanupResult::Deleted,
            Err(object_store::Error::NotFound { .. }) => CleanupResult::AlreadyGone,
            Err(error) => {
                tracing::warn!(operation = %operation, error = %ErrorChain(&error), "the review artifact could not be deleted");
                CleanupResult::Failed
            }
        }
    }
}

/// The file every candidate carries its own manifest in.
const MANIFEST_FILE: &str = "manifest.json";

/// A candidate's files (its manifest among them) as one archive, with that manifest as the
/// archive's: what a staged candidate seals, and what a refresh step writes to its folder.
pub(crate) fn candidate_archive(files: &BTreeMap<String, Vec<u8>>) -> Result<Vec<u8>, SafeError> {
    let manifest = files.get(MANIFEST_FILE).ok_or_else(|| {
        because(
            ErrorCode::ArtifactUnavailable,
            "a candidate has no manifest",
        )
    })?;
    let manifest = std::str::from_utf8(manifest).or_code(
        ErrorCode::ArtifactUnavailable,
        "read a candidate's manifest",
    )?;
    archive(files, manifest)
}

/// The files of a candidate's archive ([`candidate_archive`]).
pub(crate) fn candidate_files(bytes: &[u8]) -> Result<BTreeMap<String, Vec<u8>>, SafeError> {
    Ok(archive::unarchive(bytes)?.files)
}

/// The authenticated row of a staged candidate: never an operation ID alone, so a staged
/// candidate cannot pass for the artifact, nor one position for another.
fn staged_row(operation: OperationId, position: u32) -> String {
    format!("{operation}/candidate/{position}")
}

/// The authenticated row of a candidate's staged review notes.
fn staged_notes_row(operation: OperationId, position: u32) -> String {
    format!("{operation}/notes/{position}")
}

/// The authenticated data of an operation's artifact (the keyring adds the key version).
fn aad(operation: &str) -> Aad<'_> {
    Aad {
        purpose: Purpose::SchemaReviewArtifact,
        row: operation,
    }
}

fn join_envelope(key_version: u32, iv: &[u8], ciphertext: &[u8], auth_tag: &[u8]) -> Vec<u8> {
    let mut envelope = Vec::with_capacity(HEADER_LEN + ciphertext.len() + TAG_LEN);
    envelope.push(ENVELOPE_FORMAT);
    envelope.extend_from_slice(&key_version.to_be_bytes());
    envelope.extend_from_slice(iv);
    envelope.extend_from_slice(ciphertext);
    envelope.extend_from_slice(auth_tag);
    envelope
}

fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}
