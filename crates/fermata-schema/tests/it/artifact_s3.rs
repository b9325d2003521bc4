//! The review artifact in an S3-compatible bucket: the S3 server the test command provisions
//! (`FERMATA_TEST_S3_URL`, moto's server, bucket `fermata-test`). The same guarantees as on a
//! folder: the artifact decrypts to exactly its files, a staged candidate round-trips, an object
//! changed in the bucket is refused, and deletion can be repeated.

use std::collections::BTreeMap;
use std::sync::Arc;

use fermata_accounts::KeyringHandle;
use fermata_crypto::Keyring;
use fermata_schema::artifact::{
    ArtifactStore, S3Settings, archive, artifact_location, staged_notes_location,
};
use fermata_store::UnixMillis;
use fermata_store::schema::{CleanupResult, ErrorCode, OperationId};
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use zeroize::Zeroizing;

fn s3_settings() -> S3Settings {
    S3Settings {
        endpoint: std::env::var("FERMATA_TEST_S3_URL")
            .expect("FERMATA_TEST_S3_URL is not set; run the tests with scripts/test"),
        bucket: "fermata-test".to_owned(),
        region: "us-east-1".to_owned(),
        access_key_id: "fermata".to_owned(),
        secret_access_key: Zeroizing::new("fermata-secret".to_owned()),
    }
}

/// A second client of the same bucket, to look at and tamper with what the store wrote.
fn raw_bucket(settings: &S3Settings) -> Arc<dyn ObjectStore> {
    Arc::new(
        AmazonS3Builder::new()
            .with_endpoint(&settings.endpoint)
            .with_bucket_name(&settings.bucket)
            .with_region(&settings.region)
            .with_access_key_id(&settings.access_key_id)
            .with_secret_access_key(settings.secret_access_key.as_str())
            .with_allow_http(true)
            .build()
            .unwrap(),
    )
}

fn files() -> BTreeMap<String, Vec<u8>> {
    BTreeMap::from([
        (
            "shop/manifest.json".to_owned(),
            br#"{"counts":{"tables":1}}"#.to_vec(),
        ),
        (
            "shop/tables/orders.sql".to_owned(),
            b"CREATE TABLE `orders` (`id` int NOT NULL)\n".to_vec(),
        ),
    ])
}

#[tokio::test]
async fn artifacts_round_trip_and_tampering_is_refused_in_a_bucket() {
    let settings = s3_settings();
    let keys = Arc::new(KeyringHandle::new(Keyring::generate(), None));
    let artifacts = ArtifactStore::s3(&settings, keys).unwrap();
    let operation = OperationId::generate();
    let manifest = r#"{"databases":{"shop":{}}}"#.to_owned();
    let notes = BTreeMap::from([(
        "shop.json".to_owned(),
        br#"{"migration":null,"lint":[]}"#.to_vec(),
    )]);
    let row = artifacts
        .store(
            operation,
            files(),
            notes.clone(),
            manifest.clone(),
            UnixMillis(1_900_000_000_000),
        )
        .await
        .unwrap();
    let opened = artifacts.open(&row).await.unwrap();
    assert_eq!(opened.files, files());
    assert_eq!(opened.notes, notes);
    assert_eq!(opened.manifest, manifest);

    // The bucket holds ciphertext only.
    let bucket = raw_bucket(&settings);
    let location = ObjectPath::from(artifact_location(operation).as_str());
    let stored = bucket.get(&location).await.unwrap().bytes().await.unwrap();
    assert!(
        !stored
            .windows(b"CREATE TABLE".len())
            .any(|window| window == b"CREATE TABLE")
    );

    // A staged candidate (its files as one archive, its manifest the archive's) round-trips and
    // is deleted.
    let candidate = BTreeMap::from([
        ("manifest.json".to_owned(), b"{}".to_vec()),
        (
            "tables/a.sql".to_owned(),
            b"CREATE TABLE `a` (x int)\n".to_vec(),
        ),
    ]);
    let sealed = artifacts
        .seal_candidate(operation, 3, archive(&candidate, "{}").unwrap())
        .await
        .unwrap();
    artifacts.stage(sealed).await.unwrap();
    assert_eq!(artifacts.staged(operation, 3).await.unwrap(), candidate);
    // Its review notes beside it, sealed, go with it.
    artifacts
        .stage_notes(operation, 3, b"ALTER TABLE `a` ADD y int".to_vec())
        .await
        .unwrap();
    assert_eq!(
        artifacts
            .staged_notes(operation, 3)
            .await
            .unwrap()
            .unwrap()
            .as_slice(),
        b"ALTER TABLE `a` ADD y int"
    );
    let sealed = bucket
        .get(&ObjectPath::from(
            staged_notes_location(operation, 3).as_str(),
        ))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert!(
        !sealed
            .windows(b"ALTER TABLE".len())
            .any(|window| window == b"ALTER TABLE")
    );
    artifacts.discard_staged(operation, 3).await;
    assert_eq!(
        artifacts.staged(operation, 3).await.unwrap_err().code(),
        ErrorCode::ArtifactUnavailable
    );
    assert!(
        artifacts
            .staged_notes(operation, 3)
            .await
            .unwrap()
            .is_none()
    );

    // An object changed in the bucket does not open.
    let mut tampered = stored.to_vec();
    tampered[0] ^= 1;
    bucket
        .put(&location, PutPayload::from(tampered))
        .await
        .unwrap();
    assert_eq!(
        artifacts.open(&row).await.unwrap_err().code(),
        ErrorCode::ArtifactUnavailable
    );

    assert_eq!(artifacts.delete(operation).await, CleanupResult::Deleted);
    assert_eq!(
        artifacts.delete(operation).await,
        CleanupResult::AlreadyGone
    );
}

#[tokio::test]
async fn an_unreachable_bucket_is_a_retryable_artifact_error() {
    let settings = S3Settings {
        endpoint: "http://127.0.0.1:9".to_owned(),
        ..s3_settings()
    };
    let keys = Arc::new(KeyringHandle::new(Keyring::generate(), None));
    let artifacts = ArtifactStore::s3(&settings, keys).unwrap();
    let error = artifacts
        .store(
            OperationId::generate(),
            files(),
            BTreeMap::new(),
            "{}".to_owned(),
            UnixMillis(1_900_000_000_000),
        )
        .await
        .unwrap_err();
    assert_eq!(error.code(), ErrorCode::ArtifactUnavailable);
    assert!(error.retryable());
}
