//! The table of error codes: every code a safe error may carry, each written once with its wire
//! name, its stage, whether it is retried and its message template. The enum, [`ErrorCode::ALL`]
//! and every accessor are generated from that one table, so a code cannot be added to some of
//! them and forgotten in the others. `docs/schema-operations.md` lists the same table for
//! readers, and a test in `fermata-schema` holds the two together.

use serde::{Deserialize, Serialize};

/// Where in an operation the failure happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorStage {
    Authorization,
    Lock,
    Configuration,
    Connection,
    Tls,
    Permission,
    Generation,
    Metadata,
    Verification,
    Artifact,
    Review,
    Github,
    /// Posting an event to a webhook.
    Notification,
    Timeout,
    /// Fermata's own application database.
    Storage,
}

impl ErrorStage {
    /// The stage's name, as sent and stored (`connection`).
    pub fn name(self) -> String {
        match serde_json::to_value(self) {
            Ok(serde_json::Value::String(name)) => name,
            _ => unreachable!("unit variants serialize as strings"),
        }
    }
}

/// What a code fixes: its row of the table.
struct Row {
    name: &'static str,
    stage: ErrorStage,
    retryable: bool,
    template: &'static str,
}

/// Generates [`ErrorCode`], [`ErrorCode::ALL`] and the one match that maps a code to its row
/// from rows of the form `Variant: "WIRE_NAME", Stage, retried | permanent, "template";`, each
/// after the variant's own documentation.
macro_rules! error_codes {
    (@retryable retried) => { true };
    (@retryable permanent) => { false };
    ($(
        $(#[$doc:meta])*
        $code:ident: $name:literal, $stage:ident, $retry:ident, $template:literal;
    )*) => {
        /// Every failure an operation reports; the table fixes each one's stage, retryability
        /// and message.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum ErrorCode {
            $(
                #[doc = concat!("`", $name, "`: \"", $template, "\".")]
                #[doc = ""]
                $(#[$doc])*
                #[serde(rename = $name)]
                $code,
            )*
        }

        impl ErrorCode {
            /// Every code, in the table's order (`docs/schema-operations.md`'s table lists them
            /// all).
            pub const ALL: [ErrorCode; [$($name),*].len()] = [$(ErrorCode::$code),*];

            fn row(self) -> Row {
                match self {
                    $(ErrorCode::$code => Row {
                        name: $name,
                        stage: ErrorStage::$stage,
                        retryable: error_codes!(@retryable $retry),
                        template: $template,
                    },)*
                }
            }
        }
    };
}

// A template's `{}` is the subject; a message without one leaves it out.
error_codes! {
    AccessDenied: "ACCESS_DENIED", Authorization, permanent,
        "this needs a system administrator with a fresh session";
    /// Another refresh or verification holds the schema lease.
    LeaseHeld: "LEASE_HELD", Lock, permanent, "another schema operation ({}) is running";
    LeaseCleared: "LEASE_CLEARED", Lock, permanent,
        "an administrator cleared this operation's expired lease";
    LeaseExpired: "LEASE_EXPIRED", Lock, permanent, "the operation's lease expired";
    /// Another operation's lease expired without being released.
    LeaseNeedsClearing: "LEASE_NEEDS_CLEARING", Lock, permanent,
        "operation {} left an expired lease; an administrator must clear it";
    /// The clear action named an operation that holds no lease.
    LeaseNotHeld: "LEASE_NOT_HELD", Lock, permanent, "operation {} holds no lease";
    /// The clear action met a lease that has not expired.
    LeaseNotExpired: "LEASE_NOT_EXPIRED", Lock, permanent,
        "the lease of operation {} has not expired";
    /// The clear action met a workflow run that is still active.
    RunStillActive: "RUN_STILL_ACTIVE", Lock, permanent,
        "the workflow run of operation {} is still active";
    OperationMissing: "OPERATION_MISSING", Configuration, permanent, "operation {} does not exist";
    InvalidRequestKey: "INVALID_REQUEST_KEY", Configuration, permanent,
        "a request key has 1 to 100 printable ASCII characters";
    RequestKeyReused: "REQUEST_KEY_REUSED", Configuration, permanent,
        "the request key was already used for operation {}, a different request";
    RunLost: "RUN_LOST", Timeout, permanent,
        "the operation's workflow run ended or vanished before the operation did";
    RunUnreadable: "RUN_UNREADABLE", Storage, permanent,
        "the workflow run's stored state cannot be read";
    /// A refresh waits while an earlier pull request is open.
    PullRequestOpen: "PULL_REQUEST_OPEN", Lock, permanent,
        "the pull request of operation {} is still open";
    PullRequestMissing: "PULL_REQUEST_MISSING", Github, permanent,
        "operation {} has no pull request on the forge";
    InventoryExpired: "INVENTORY_EXPIRED", Configuration, permanent,
        "the inventory is older than 24 hours; discover databases again";
    InventoryMissing: "INVENTORY_MISSING", Configuration, permanent, "the inventory does not exist";
    DatabaseNotInInventory: "DATABASE_NOT_IN_INVENTORY", Configuration, permanent,
        "database {} is not in the inventory";
    DatabaseNoLongerVisible: "DATABASE_NO_LONGER_VISIBLE", Metadata, permanent,
        "database {} is no longer visible to the snapshot account";
    DatabaseNotRegistered: "DATABASE_NOT_REGISTERED", Configuration, permanent,
        "database {} has no merged snapshot in the package to verify against";
    EmptySelection: "EMPTY_SELECTION", Configuration, permanent, "select at least one database";
    InvalidIdentifier: "INVALID_IDENTIFIER", Configuration, permanent,
        "a database name is not a valid identifier";
    SourceNotConfigured: "SOURCE_NOT_CONFIGURED", Configuration, permanent,
        "no MySQL source is configured";
    PackageNotConfigured: "PACKAGE_NOT_CONFIGURED", Configuration, permanent,
        "no schema package repository is configured";
    /// The configured source or its TLS settings cannot be used.
    InvalidSourceConfiguration: "INVALID_SOURCE_CONFIGURATION", Configuration, permanent,
        "the MySQL source configuration cannot be used";
    ConnectionRefused: "CONNECTION_REFUSED", Connection, retried,
        "the MySQL server could not be reached";
    /// The connection dropped or an answer never came.
    ConnectionLost: "CONNECTION_LOST", Connection, retried,
        "the connection to the MySQL server was lost";
    /// TLS negotiation or certificate verification failed.
    TlsFailed: "TLS_FAILED", Tls, permanent, "the TLS connection to the MySQL server failed";
    AuthenticationFailed: "AUTHENTICATION_FAILED", Permission, permanent,
        "the snapshot account's credentials were refused";
    /// The subject, when there is one, is the database: the message ends "on `shop`".
    PermissionDenied: "PERMISSION_DENIED", Permission, permanent,
        "the snapshot account lacks a privilege it needs{}";
    UnsupportedSchemaOutput: "UNSUPPORTED_SCHEMA_OUTPUT", Generation, permanent,
        "the schema of database {} cannot be captured faithfully";
    /// The server refused a catalog query for good: it names a column or table this server's
    /// `information_schema` does not have.
    MetadataUnreadable: "METADATA_UNREADABLE", Metadata, permanent,
        "the catalog of database {} cannot be read on this server release";
    /// The server refused a catalog query with an error no other code describes; its number is
    /// logged.
    QueryRefused: "QUERY_REFUSED", Metadata, permanent,
        "the MySQL server refused a query about database {}";
    /// MySQL error 1205.
    LockWaitTimeout: "LOCK_WAIT_TIMEOUT", Timeout, retried,
        "a query on the MySQL server timed out waiting for a lock";
    /// MySQL error 1213.
    Deadlock: "DEADLOCK", Metadata, retried, "a query on the MySQL server was ended by a deadlock";
    /// By `KILL QUERY` or a server shutting down (MySQL error 1317).
    QueryInterrupted: "QUERY_INTERRUPTED", Connection, retried,
        "a query on the MySQL server was interrupted";
    /// MySQL error 3024, MariaDB 1969.
    QueryTimedOut: "QUERY_TIMED_OUT", Timeout, retried,
        "a query ran past the MySQL server's execution time limit";
    VerificationFailed: "VERIFICATION_FAILED", Verification, permanent,
        "database {} differs from its snapshot";
    /// Trying again takes a new snapshot.
    SchemaChanged: "SCHEMA_CHANGED", Verification, retried,
        "the schema of database {} changed while it was snapshotted";
    /// The review artifact could not be written, read or decrypted.
    ArtifactUnavailable: "ARTIFACT_UNAVAILABLE", Artifact, retried,
        "the review artifact could not be stored or read";
    DiffExpired: "DIFF_EXPIRED", Artifact, permanent,
        "the drift diff of operation {} is past its retention window";
    /// A verification's drift holds no migration script for the database named: it did not
    /// drift, or its drift was sealed before scripts were (or without them).
    NoMigrationScript: "NO_MIGRATION_SCRIPT", Artifact, permanent,
        "the drift holds no migration script for database {}";
    ReviewExpired: "REVIEW_EXPIRED", Review, permanent,
        "the review window closed without a decision";
    ReviewRejected: "REVIEW_REJECTED", Review, permanent, "the review was rejected";
    ReviewNotPending: "REVIEW_NOT_PENDING", Review, permanent,
        "operation {} is not awaiting a review decision";
    /// The forge refused or failed a request.
    GithubFailed: "GITHUB_FAILED", Github, retried, "the pull request could not be published";
    GithubRateLimited: "GITHUB_RATE_LIMITED", Github, retried,
        "the forge asked to wait before more requests";
    /// Credentials, permissions, a missing object or an invalid request: trying again unchanged
    /// will not help.
    GithubRefused: "GITHUB_REFUSED", Github, permanent,
        "the forge refused the request (credentials, permissions or a missing object)";
    PublicationConflict: "PUBLICATION_CONFLICT", Github, permanent,
        "the forge holds a branch or pull request of this operation that differs from what would be published";
    /// The base branch moved and changed what the pull request touches; the artifact is kept
    /// for a new refresh.
    BaseChanged: "BASE_CHANGED", Github, permanent,
        "the base branch changed the files this pull request would touch; refresh again";
    /// A re-publication named an operation whose publication has not failed.
    NothingToPublish: "NOTHING_TO_PUBLISH", Github, permanent,
        "operation {} has no failed publication to publish again";
    StartFailed: "START_FAILED", Connection, permanent, "the operation could not be started";
    StartUnknown: "START_UNKNOWN", Connection, retried, "whether the operation started is unknown";
    StepTimedOut: "STEP_TIMED_OUT", Timeout, retried, "a step took longer than allowed";
    /// A webhook could not be reached, or answered 429 or a 5xx status.
    NotificationFailed: "NOTIFICATION_FAILED", Notification, retried,
        "the webhook could not be reached or failed; it is tried again";
    /// A webhook answered with a status that trying again will not change (a 3xx or a 4xx but
    /// 429).
    NotificationRefused: "NOTIFICATION_REFUSED", Notification, permanent,
        "the webhook refused the event";
    StorageUnavailable: "STORAGE_UNAVAILABLE", Storage, retried,
        "the application database is unavailable; try again";
}

impl ErrorCode {
    /// The code's name, as sent and stored (`CONNECTION_LOST`).
    pub fn name(self) -> String {
        self.row().name.to_owned()
    }

    /// The code called `name` (`CONNECTION_LOST`), if there is one.
    pub fn from_name(name: &str) -> Option<ErrorCode> {
        ErrorCode::ALL
            .into_iter()
            .find(|code| code.row().name == name)
    }

    /// The stage this code belongs to.
    pub fn stage(self) -> ErrorStage {
        self.row().stage
    }

    /// Whether trying again, unchanged, may succeed. Authorization, configuration, permission
    /// and unsupported-output errors are permanent and never retried.
    pub fn retryable(self) -> bool {
        self.row().retryable
    }

    /// The message template; `{}` is the subject.
    pub(crate) fn template(self) -> &'static str {
        self.row().template
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row of the table, checked: the wire name is the variant's (`AccessDenied` as
    /// `ACCESS_DENIED`) and reads back, the template is a lowercase sentence with at most one
    /// subject, and what the caller must change first is never retried.
    #[test]
    fn every_row_of_the_table_is_well_formed() {
        for code in ErrorCode::ALL {
            let variant = format!("{code:?}");
            let mut name = String::new();
            for (index, letter) in variant.char_indices() {
                if index > 0 && letter.is_ascii_uppercase() {
                    name.push('_');
                }
                name.push(letter.to_ascii_uppercase());
            }
            assert_eq!(code.name(), name);
            assert_eq!(ErrorCode::from_name(&name), Some(code));
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<ErrorCode>(&json).unwrap(), code);

            let template = code.template();
            assert!(template.matches("{}").count() <= 1, "{code:?}");
            assert!(!template.replace("{}", "").contains(['{', '}']), "{code:?}");
            assert!(template.starts_with(char::is_lowercase), "{code:?}");
            assert!(!template.ends_with('.'), "{code:?}");

            let caller_must_change = matches!(
                code.stage(),
                ErrorStage::Authorization
                    | ErrorStage::Configuration
                    | ErrorStage::Permission
                    | ErrorStage::Generation
            );
            assert!(
                !(caller_must_change && code.retryable()),
                "{code:?} is retried"
            );
        }
        assert_eq!(ErrorCode::from_name("connection_lost"), None);
    }
}
