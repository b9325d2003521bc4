//! The table of safe error codes in `docs/schema-operations.md` is the documented list: it names
//! every code with its stage and whether it is retried, exactly as the code says.

use fermata_store::schema::ErrorCode;

#[test]
fn the_docs_list_every_code_with_its_stage_and_retries() {
    let docs = include_str!("../../../../docs/schema-operations.md");
    for code in ErrorCode::ALL {
        let name = format!("`{}`", code.name());
        let row = docs
            .lines()
            .find(|line| line.starts_with('|') && line.contains(&name))
            .unwrap_or_else(|| panic!("docs/schema-operations.md does not list {name}"));
        let retried = if code.retryable() {
            "| yes |"
        } else {
            "| no |"
        };
        assert!(
            row.contains(&format!("| {} |", code.stage().name())) && row.contains(retried),
            "docs/schema-operations.md's row for {name} has the wrong stage or retry: {row}"
        );
    }
}
