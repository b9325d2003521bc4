//! The encrypted review artifact against a real local-folder object store: round trip,
//! determinism, tampering, no plaintext in the row, retries that touch only their own object,
//! idempotent deletion, and key rotation.

use std::collections::BTreeMap;
use std::sync::Arc;

use fermata_accounts::KeyringHandle;
use fermata_crypto::Keyring;
use fermata_schema::artifact::{
    ARTIFACT_FOLDER, ArtifactContents, ArtifactStore, archive, artifact_location,
};
use fermata_store::UnixMillis;
use fermata_store::schema::{CleanupResult, ErrorCode, NewArtifact, OperationId};
use futures::TryStreamExt;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};

const MANIFEST: &str = r#"{"databases":["shop","ünïcode db"],"snapshot_hash":"abc"}"#;
const EXPIRY: UnixMillis = UnixMillis(1_900_000_000_000);

/// Candidate files with odd paths: unicode, spaces, a path too long for a plain tar header, and
/// an empty file.
fn candidates() -> BTreeMap<String, Vec<u8>> {
    let long = format!("shop/tables/{}.sql", "very_long_table_name_".repeat(8));
    BTreeMap::from([
        (
            "shop/tables/orders.sql".to_owned(),
            b"CREATE TABLE `orders` (`id` int NOT NULL)".to_vec(),
        ),
        (
            "shop/views/open orders.sql".to_owned(),
            b"CREATE VIEW `open orders` AS SELECT 1".to_vec(),
        ),
        (
            "ünïcode db/tables/café ☕.sql".to_owned(),
            "CREATE TABLE `café ☕` (`prix €` decimal(10,2))"
                .as_bytes()
                .to_vec(),
        ),
        (
            "ünïcode db/schema.json".to_owned(),
            br#"{"tables":1}"#.to_vec(),
        ),
        (long, b"CREATE TABLE long_one (x int)".to_vec()),
        ("shop/events/empty.sql".to_owned(), Vec::new()),
        ("shop/binary.bin".to_owned(), vec![0, 159, 146, 150, 255]),
    ])
}

/// A real local folder, its object store, and an artifact store over both.
struct Fixture {
    _folder: tempfile::TempDir,
    objects: Arc<dyn ObjectStore>,
    artifacts: ArtifactStore,
}

fn fixture_with(keyring: Keyring) -> Fixture {
    let folder = tempfile::tempdir().unwrap();
    let objects: Arc<dyn ObjectStore> =
        Arc::new(LocalFileSystem::new_with_prefix(folder.path()).unwrap());
    let keys = Arc::new(KeyringHandle::new(keyring, None));
    let artifacts = ArtifactStore::new(Arc::clone(&objects), keys);
    Fixture {
        _folder: folder,
        objects,
        artifacts,
    }
}

fn fixture() -> Fixture {
    fixture_with(Keyring::generate())
}

fn expected() -> ArtifactContents {
    ArtifactContents {
        files: candidates(),
        notes: BTreeMap::from([("db.json".to_owned(), b"{}".to_vec())]),
        manifest: MANIFEST.to_owned(),
    }
}

async fn store(fixture: &Fixture, operation: OperationId) -> NewArtifact {
    fixture
        .artifacts
        .store(
            operation,
            candidates(),
            expected().notes,
            MANIFEST.to_owned(),
            EXPIRY,
        )
        .await
        .unwrap()
}

async fn object_bytes(objects: &dyn ObjectStore, location: &str) -> Vec<u8> {
    objects
        .get(&ObjectPath::from(location))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .to_vec()
}

async fn listing(objects: &dyn ObjectStore) -> Vec<String> {
    let mut locations: Vec<String> = objects
        .list(None)
        .map_ok(|meta| meta.location.to_string())
        .try_collect()
        .await
        .unwrap();
    locations.sort();
    locations
}

async fn assert_unavailable(fixture: &Fixture, artifact: &NewArtifact, what: &str) {
    let error = fixture.artifacts.open(artifact).await.unwrap_err();
    assert_eq!(error.code(), ErrorCode::ArtifactUnavailable, "{what}");
}

#[tokio::test]
async fn decrypts_to_exactly_the_candidate_files_and_manifest() {
    let fixture = fixture();
    let operation = OperationId::generate();
    let artifact = store(&fixture, operation).await;

    assert_eq!(artifact.operation, operation);
    assert_eq!(artifact.blob_locator, artifact_location(operation));
    assert_eq!(
        artifact.blob_locator,
        format!("{ARTIFACT_FOLDER}/{operation}.bin")
    );
    assert_eq!(artifact.cleanup_target, artifact.blob_locator);
    assert_eq!(artifact.key_version, 1);
    assert_eq!(artifact.iv.len(), 12);
    assert_eq!(artifact.auth_tag.len(), 16);
    assert_eq!(artifact.ciphertext_hash.len(), 64);
    assert_eq!(artifact.manifest, MANIFEST);
    assert_eq!(artifact.decision_expires_at, EXPIRY);

    assert_eq!(fixture.artifacts.open(&artifact).await.unwrap(), expected());
}

#[tokio::test]
async fn the_folder_store_creates_its_folder_and_round_trips() {
    let folder = tempfile::tempdir().unwrap();
    let root = folder.path().join("data").join("artifacts");
    let keys = Arc::new(KeyringHandle::new(Keyring::generate(), None));
    let artifacts = ArtifactStore::local(&root, keys).unwrap();
    let operation = OperationId::generate();
    let artifact = artifacts
        .store(
            operation,
            candidates(),
            expected().notes,
            MANIFEST.to_owned(),
            EXPIRY,
        )
        .await
        .unwrap();
    assert!(
        root.join(ARTIFACT_FOLDER)
            .join(format!("{operation}.bin"))
            .is_file()
    );
    assert_eq!(artifacts.open(&artifact).await.unwrap(), expected());
}

#[tokio::test]
async fn the_archive_is_deterministic_and_each_encryption_is_fresh() {
    let first = archive(&candidates(), MANIFEST).unwrap();
    let second = archive(&candidates(), MANIFEST).unwrap();
    assert_eq!(first, second);
    // Insertion order does not matter either.
    let reversed: BTreeMap<String, Vec<u8>> = candidates().into_iter().rev().collect();
    assert_eq!(archive(&reversed, MANIFEST).unwrap(), first);
    // A different input gives a different archive.
    let mut changed = candidates();
    changed.insert("shop/tables/extra.sql".to_owned(), b"x".to_vec());
    assert_ne!(archive(&changed, MANIFEST).unwrap(), first);

    let fixture = fixture();
    let operation = OperationId::generate();
    let one = store(&fixture, operation).await;
    let one_bytes = object_bytes(&*fixture.objects, &one.blob_locator).await;
    let two = store(&fixture, operation).await;
    let two_bytes = object_bytes(&*fixture.objects, &two.blob_locator).await;
    assert_ne!(one.iv, two.iv, "two encryptions shared a nonce");
    assert_ne!(one_bytes, two_bytes);
    assert_ne!(one.ciphertext_hash, two.ciphertext_hash);
    assert_eq!(fixture.artifacts.open(&two).await.unwrap(), expected());
}

#[tokio::test]
async fn paths_that_are_not_clean_relative_paths_are_refused() {
    let fixture = fixture();
    for bad in [
        "/etc/passwd",
        "shop/../../escape.sql",
        "..",
        "shop//orders.sql",
        "./shop/orders.sql",
        "shop/orders.sql/",
        "shop\\orders.sql",
        "",
    ] {
        let mut files = candidates();
        files.insert(bad.to_owned(), b"x".to_vec());
        assert_eq!(
            archive(&files, MANIFEST).unwrap_err().code(),
            ErrorCode::ArtifactUnavailable,
            "{bad:?}"
        );
        let error = fixture
            .artifacts
            .store(
                OperationId::generate(),
                files,
                BTreeMap::new(),
                MANIFEST.to_owned(),
                EXPIRY,
            )
            .await
            .unwrap_err();
        assert_eq!(error.code(), ErrorCode::ArtifactUnavailable, "{bad:?}");
    }
    let error = fixture
        .artifacts
        .store(
            OperationId::generate(),
            candidates(),
            BTreeMap::new(),
            "not json".to_owned(),
            EXPIRY,
        )
        .await
        .unwrap_err();
    assert_eq!(error.code(), ErrorCode::ArtifactUnavailable);
    assert!(
        listing(&*fixture.objects).await.is_empty(),
        "a refused artifact was written"
    );
}

#[tokio::test]
async fn tampering_is_detected() {
    let fixture = fixture();
    let operation = OperationId::generate();
    let artifact = store(&fixture, operation).await;
    let location = ObjectPath::from(artifact.blob_locator.as_str());
    let original = object_bytes(&*fixture.objects, &artifact.blob_locator).await;

    // One flipped ciphertext byte, with the row's hash updated to match so that the
    // authentication tag is what catches it.
    for index in [0, original.len() / 2, original.len() - 1] {
        let mut flipped = original.clone();
        flipped[index] ^= 0x01;
        fixture
            .objects
            .put(&location, flipped.clone().into())
            .await
            .unwrap();
        assert_unavailable(&fixture, &artifact, "flipped byte, stale hash").await;
        let rehashed = NewArtifact {
            ciphertext_hash: sha256_hex(&flipped),
            ..artifact.clone()
        };
        assert_unavailable(&fixture, &rehashed, "flipped byte, matching hash").await;
    }
    fixture
        .objects
        .put(&location, original.clone().into())
        .await
        .unwrap();
    assert_eq!(fixture.artifacts.open(&artifact).await.unwrap(), expected());

    let mut tag = artifact.auth_tag.clone();
    tag[3] ^= 0x80;
    let changed_tag = NewArtifact {
        auth_tag: tag,
        ..artifact.clone()
    };
    assert_unavailable(&fixture, &changed_tag, "changed auth tag").await;
    let short_tag = NewArtifact {
        auth_tag: artifact.auth_tag[..15].to_vec(),
        ..artifact.clone()
    };
    assert_unavailable(&fixture, &short_tag, "short auth tag").await;

    let mut iv = artifact.iv.clone();
    iv[0] ^= 0x01;
    let changed_iv = NewArtifact {
        iv,
        ..artifact.clone()
    };
    assert_unavailable(&fixture, &changed_iv, "changed iv").await;

    let mut hash = artifact.ciphertext_hash.clone().into_bytes();
    hash[0] = if hash[0] == b'0' { b'1' } else { b'0' };
    let changed_hash = NewArtifact {
        ciphertext_hash: String::from_utf8(hash).unwrap(),
        ..artifact.clone()
    };
    assert_unavailable(&fixture, &changed_hash, "changed ciphertext hash").await;

    let other_version = NewArtifact {
        key_version: 7,
        ..artifact.clone()
    };
    assert_unavailable(&fixture, &other_version, "unknown key version").await;

    let changed_manifest = NewArtifact {
        manifest: MANIFEST.replace("abc", "abd"),
        ..artifact.clone()
    };
    assert_unavailable(&fixture, &changed_manifest, "changed manifest").await;

    // The artifact read as another operation: as the row of that operation, pointing at this
    // operation's object, and with the object copied to that operation's location.
    let other = OperationId::generate();
    let as_other = NewArtifact {
        operation: other,
        ..artifact.clone()
    };
    assert_unavailable(&fixture, &as_other, "row of another operation").await;
    let moved = NewArtifact {
        operation: other,
        blob_locator: artifact_location(other),
        cleanup_target: artifact_location(other),
        ..artifact.clone()
    };
    fixture
        .objects
        .put(
            &ObjectPath::from(artifact_location(other).as_str()),
            original.clone().into(),
        )
        .await
        .unwrap();
    assert_unavailable(&fixture, &moved, "object moved to another operation").await;

    // Still intact after all of that.
    assert_eq!(fixture.artifacts.open(&artifact).await.unwrap(), expected());

    fixture.objects.delete(&location).await.unwrap();
    assert_unavailable(&fixture, &artifact, "missing object").await;
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    format!("{:x}", Sha256::digest(bytes))
}

#[tokio::test]
async fn the_row_holds_no_plaintext() {
    let fixture = fixture();
    let artifact = store(&fixture, OperationId::generate()).await;
    // The manifest is meant to be in the row; every other field is checked.
    let without_manifest = NewArtifact {
        manifest: String::new(),
        ..artifact.clone()
    };
    let text = format!("{without_manifest:?}");
    let mut fields: Vec<Vec<u8>> = vec![
        artifact.blob_locator.clone().into_bytes(),
        artifact.cleanup_target.clone().into_bytes(),
        artifact.ciphertext_hash.clone().into_bytes(),
        artifact.iv.clone(),
        artifact.auth_tag.clone(),
    ];
    fields.push(text.clone().into_bytes());
    let stored = object_bytes(&*fixture.objects, &artifact.blob_locator).await;

    for (path, content) in candidates() {
        let mut needles = vec![path.clone().into_bytes()];
        needles.extend(path.split('/').map(|part| part.as_bytes().to_vec()));
        if content.len() >= 4 {
            needles.push(content.clone());
            needles.push(content[..4].to_vec());
        }
        for needle in needles {
            for field in &fields {
                assert!(
                    !contains(field, &needle),
                    "{:?} appears in the row",
                    String::from_utf8_lossy(&needle)
                );
            }
            assert!(
                !contains(&stored, &needle),
                "{:?} appears in the stored object",
                String::from_utf8_lossy(&needle)
            );
        }
    }
    assert!(!contains(&stored, MANIFEST.as_bytes()));
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty()
        && haystack
            .windows(needle.len())
            .any(|window| window == needle)
}

#[tokio::test]
async fn a_retried_store_writes_only_its_own_object() {
    let fixture = fixture();
    let other = OperationId::generate();
    let other_artifact = store(&fixture, other).await;
    let other_bytes = object_bytes(&*fixture.objects, &other_artifact.blob_locator).await;

    let operation = OperationId::generate();
    let first = store(&fixture, operation).await;
    let before = listing(&*fixture.objects).await;
    let mut expected_listing = vec![artifact_location(other), artifact_location(operation)];
    expected_listing.sort();
    assert_eq!(before, expected_listing);

    let retried = store(&fixture, operation).await;
    let after = listing(&*fixture.objects).await;
    assert_eq!(after, before);
    assert_eq!(retried.blob_locator, first.blob_locator);
    assert_eq!(
        object_bytes(&*fixture.objects, &other_artifact.blob_locator).await,
        other_bytes,
        "another operation's artifact changed"
    );
    assert_eq!(
        fixture.artifacts.open(&other_artifact).await.unwrap(),
        expected()
    );
    assert_eq!(fixture.artifacts.open(&retried).await.unwrap(), expected());
    // The first attempt's row no longer matches the object it was replaced by.
    assert_unavailable(&fixture, &first, "superseded attempt").await;
}

#[tokio::test]
async fn deletion_is_idempotent() {
    let fixture = fixture();
    let other = OperationId::generate();
    let other_artifact = store(&fixture, other).await;
    let operation = OperationId::generate();
    let artifact = store(&fixture, operation).await;

    assert_eq!(
        fixture.artifacts.delete(operation).await,
        CleanupResult::Deleted
    );
    assert_eq!(
        fixture.artifacts.delete(operation).await,
        CleanupResult::AlreadyGone
    );
    assert_eq!(
        fixture.artifacts.delete(OperationId::generate()).await,
        CleanupResult::AlreadyGone
    );
    assert_unavailable(&fixture, &artifact, "deleted").await;
    assert_eq!(
        listing(&*fixture.objects).await,
        vec![artifact_location(other)]
    );
    assert_eq!(
        fixture.artifacts.open(&other_artifact).await.unwrap(),
        expected()
    );
}

#[tokio::test]
async fn an_artifact_sealed_before_a_key_rotation_still_opens() {
    let mut keyring = Keyring::generate();
    let copy = Keyring::from_key_file(&keyring.to_key_file()).unwrap();
    let before = fixture_with(copy);
    let operation = OperationId::generate();
    let old = store(&before, operation).await;
    assert_eq!(old.key_version, 1);

    assert_eq!(keyring.rotate(), 2);
    let after = Fixture {
        artifacts: ArtifactStore::new(
            Arc::clone(&before.objects),
            Arc::new(KeyringHandle::new(keyring, None)),
        ),
        ..before
    };
    assert_eq!(after.artifacts.open(&old).await.unwrap(), expected());

    let other = OperationId::generate();
    let new = store(&after, other).await;
    assert_eq!(new.key_version, 2);
    assert_eq!(after.artifacts.open(&new).await.unwrap(), expected());
    // The recorded version is the one used: the old artifact relabelled as version 2 does not
    // open.
    let relabelled = NewArtifact {
        key_version: 2,
        ..old.clone()
    };
    assert_unavailable(&after, &relabelled, "relabelled key version").await;
}
