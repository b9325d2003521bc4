//! What the upgrade and migration tests share: this release's migration files up to an earlier
//! release's last, so a database can be left as that release left it and then migrated, or all
//! of them, to change.

use std::path::Path;

use fermata_store_sql::Dialect;

/// This release's migration files for `dialect` whose names sort before `first_new` (e.g.
/// `"0018"`), in a temporary folder.
pub(crate) fn migrations_before(dialect: Dialect, first_new: &str) -> tempfile::TempDir {
    migrations_where(dialect, |name| name < first_new)
}

/// Every migration file of this release for `dialect`, in a temporary folder (which a test may
/// change).
pub(crate) fn all_migrations(dialect: Dialect) -> tempfile::TempDir {
    migrations_where(dialect, |_| true)
}

fn migrations_where(dialect: Dialect, keep: impl Fn(&str) -> bool) -> tempfile::TempDir {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations")
        .join(dialect.name());
    let copy = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(source).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if keep(&name) {
            std::fs::copy(entry.path(), copy.path().join(&name)).unwrap();
        }
    }
    copy
}
