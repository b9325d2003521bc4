//! What the upgrade tests share: this release's migration files up to an earlier release's last,
//! so a database can be left as that release left it and then migrated.

use std::path::Path;

use fermata_store_sql::Dialect;

/// This release's migration files for `dialect` whose names sort before `first_new` (e.g.
/// `"0018"`), in a temporary folder.
pub(crate) fn migrations_before(dialect: Dialect, first_new: &str) -> tempfile::TempDir {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations")
        .join(dialect.name());
    let copy = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(source).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.as_str() < first_new {
            std::fs::copy(entry.path(), copy.path().join(&name)).unwrap();
        }
    }
    copy
}
