//! `fermata export` and `fermata import` on the real binary and both engines: a repository with
//! a child, an image, a former slug and an archived document goes out and back exactly, a second
//! import changes nothing, a plain Markdown folder becomes documents, and bad folders are refused
//! before anything is written. The repository's download from a running server is the same
//! export, and an import is refused while that server holds the writer lease.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::{Target, add_user};

on_both!(a_repository_round_trips_through_files);

/// A 1x1 PNG.
const PNG: [u8; 70] = [
    0x89, 0x50, 0x4e, 0x47, 0xd, 0xa, 0x1a, 0xa, 0x0, 0x0, 0x0, 0xd, 0x49, 0x48, 0x44, 0x52, 0x0,
    0x0, 0x0, 0x1, 0x0, 0x0, 0x0, 0x1, 0x8, 0x6, 0x0, 0x0, 0x0, 0x1f, 0x15, 0xc4, 0x89, 0x0, 0x0,
    0x0, 0xd, 0x49, 0x44, 0x41, 0x54, 0x78, 0xda, 0x63, 0x64, 0xf8, 0xcf, 0x50, 0xf, 0x0, 0x3,
    0x86, 0x1, 0x80, 0x5a, 0x34, 0x7d, 0x6b, 0x0, 0x0, 0x0, 0x0, 0x49, 0x45, 0x4e, 0x44, 0xae,
    0x42, 0x60, 0x82,
];
const PNG_SHA: &str = "6b7fa434f92a8b80aab02d9bf1a12e49ffcae424e4013a1c4f68b67e3d2bbcd0";
const PLAN: &str = "0b6f3c1e-52a4-4d8e-9c61-7a2f0e9d4b13";

fn write(root: &Path, path: &str, bytes: &[u8]) {
    let file = root.join(path);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(file, bytes).unwrap();
}

fn plan_text(id: &str) -> String {
    format!("# Release plan\n\n![dot](/api/v1/documents/{id}/images/{PNG_SHA}?w=480)\n")
}

/// A folder as `fermata export` writes it, made by hand.
fn source_folder(root: &Path) -> Value {
    let manifest = json!({
        "format": "fermata-repository-export",
        "version": 1,
        "repository": "ada/notes",
        "documents": [
            {"id": "5d1c7a10-8e0b-4f5e-9a51-2b8f6f3c9d01", "title": "Old notes", "slug": "old-notes",
             "former_slugs": [], "archived": true, "parent": null, "path": "old-notes.md", "images": []},
            {"id": PLAN, "title": "Release plan", "slug": "release-plan",
             "former_slugs": ["draft-plan"], "archived": false, "parent": null, "path": "release-plan.md",
             "images": [{"sha256": PNG_SHA, "content_type": "image/png", "size": PNG.len(),
                         "path": format!("release-plan.images/{PNG_SHA}.png")}]},
            {"id": "9a7e3b52-1c4d-4e6f-8a9b-0c1d2e3f4a5b", "title": "Budget", "slug": "budget",
             "former_slugs": [], "archived": false, "parent": PLAN, "path": "release-plan/budget.md",
             "images": []},
        ]
    });
    write(root, "fermata-export.json", manifest.to_string().as_bytes());
    write(root, "old-notes.md", b"Kept for the record.\n");
    write(root, "release-plan.md", plan_text(PLAN).as_bytes());
    write(
        root,
        "release-plan/budget.md",
        b"| item | cost |\n|---|---|\n| cake | 3 |\n",
    );
    write(root, &format!("release-plan.images/{PNG_SHA}.png"), &PNG);
    manifest
}

fn run(target: &Target, words: &[&str]) -> (i32, String) {
    let output = target.command_words(words).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code().unwrap_or(-1), text)
}

fn succeed(target: &Target, words: &[&str]) -> String {
    let (code, text) = run(target, words);
    assert_eq!(code, 0, "{words:?}: {text}");
    text
}

fn manifest_of(root: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(root.join("fermata-export.json")).unwrap()).unwrap()
}

fn read(root: &Path, path: &str) -> Vec<u8> {
    std::fs::read(root.join(path)).unwrap()
}

/// The manifest without its IDs, and every file it names, with each ID replaced by the
/// document's path: what must be the same after a round trip into another repository.
fn contents(root: &Path) -> (Value, Vec<(String, Vec<u8>)>) {
    let mut manifest = manifest_of(root);
    let documents = manifest["documents"].as_array().unwrap().clone();
    let named = |text: String| {
        documents.iter().fold(text, |text, d| {
            text.replace(d["id"].as_str().unwrap(), d["path"].as_str().unwrap())
        })
    };
    let mut files = Vec::new();
    for document in manifest["documents"].as_array_mut().unwrap() {
        let path = document["path"].as_str().unwrap().to_owned();
        files.push((
            path.clone(),
            named(String::from_utf8(read(root, &path)).unwrap()).into_bytes(),
        ));
        for image in document["images"].as_array().unwrap() {
            let path = image["path"].as_str().unwrap();
            files.push((path.to_owned(), read(root, path)));
        }
        document["id"] = Value::Null;
        if let Some(parent) = document["parent"].as_str() {
            document["parent"] = named(parent.to_owned()).into();
        }
    }
    manifest["repository"] = Value::Null;
    (manifest, files)
}

async fn a_repository_round_trips_through_files(target: Target) {
    add_user(&target, "ada", false);
    let work = tempfile::tempdir().unwrap();
    let dir = |name: &str| work.path().join(name).display().to_string();
    let source = source_folder(&work.path().join("source"));

    let imported = succeed(&target, &["import", &dir("source"), "ada/notes"]);
    assert!(
        imported.contains("3 created, 0 updated, 0 unchanged, 1 images stored"),
        "{imported}"
    );

    // Into a fresh database the IDs are kept, so the export is the folder it came from.
    succeed(&target, &["export", "ada/notes", &dir("first")]);
    assert_eq!(manifest_of(&work.path().join("first")), source);
    assert_eq!(
        contents(&work.path().join("first")),
        contents(&work.path().join("source"))
    );

    // Into another repository of the same database the IDs are new and the image addresses in
    // the text follow them; everything else is the same.
    succeed(&target, &["import", &dir("first"), "ada/copy"]);
    succeed(&target, &["export", "ada/copy", &dir("copy")]);
    let copy = manifest_of(&work.path().join("copy"));
    let plan_copy = copy["documents"][1]["id"].as_str().unwrap();
    assert_ne!(plan_copy, PLAN);
    assert_eq!(copy["documents"][2]["parent"].as_str(), Some(plan_copy));
    assert_eq!(
        String::from_utf8(read(&work.path().join("copy"), "release-plan.md")).unwrap(),
        plan_text(plan_copy)
    );
    assert_eq!(
        contents(&work.path().join("copy")),
        contents(&work.path().join("first"))
    );

    // Again: nothing is duplicated or changed.
    let again = succeed(&target, &["import", &dir("first"), "ada/copy"]);
    assert!(
        again.contains("0 created, 0 updated, 3 unchanged, 0 images stored"),
        "{again}"
    );
    succeed(&target, &["export", "ada/copy", &dir("copy-again")]);
    assert_eq!(manifest_of(&work.path().join("copy-again")), copy);

    // A changed text is written; the rest stays.
    write(&work.path().join("first"), "old-notes.md", b"Rewritten.\n");
    let changed = succeed(&target, &["import", &dir("first"), "ada/copy"]);
    assert!(
        changed.contains("0 created, 1 updated, 2 unchanged"),
        "{changed}"
    );
    succeed(&target, &["export", "ada/copy", &dir("copy-changed")]);
    assert_eq!(
        read(&work.path().join("copy-changed"), "old-notes.md"),
        b"Rewritten.\n"
    );
    assert_eq!(manifest_of(&work.path().join("copy-changed")), copy);

    // A plain folder of Markdown: one level of children, deeper folders skipped and said so.
    let plain = work.path().join("plain");
    write(&plain, "Guide.md", b"Intro\n# The Guide\n");
    write(&plain, "Guide/Step One.md", b"First.\n");
    write(&plain, "Guide/deeper/lost.md", b"Too deep.\n");
    write(&plain, "notes.txt", b"Not Markdown.\n");
    let output = succeed(&target, &["import", &dir("plain"), "ada/plain"]);
    assert!(output.contains("2 created"), "{output}");
    assert!(output.contains("skipped Guide/deeper/"), "{output}");
    assert!(output.contains("skipped notes.txt"), "{output}");
    succeed(&target, &["export", "ada/plain", &dir("plain-out")]);
    let exported = manifest_of(&work.path().join("plain-out"));
    let documents = exported["documents"].as_array().unwrap();
    assert_eq!(documents.len(), 2);
    assert_eq!(documents[0]["title"], "The Guide");
    // The canonical slug follows the title, as a rename's does; the file's name still resolves.
    assert_eq!(documents[0]["slug"], "the-guide");
    assert_eq!(documents[0]["former_slugs"], json!(["guide"]));
    assert_eq!(documents[1]["title"], "Step One");
    assert_eq!(documents[1]["path"], "the-guide/step-one.md");
    assert_eq!(documents[1]["parent"], documents[0]["id"]);
    assert_eq!(
        read(&work.path().join("plain-out"), "the-guide/step-one.md"),
        b"First.\n"
    );

    // Refused before anything is written: an unknown version, a path out of the folder.
    for (name, change) in [
        ("newer", json!({"version": 2})),
        (
            "escaping",
            json!({"documents": [{"id": PLAN, "title": "x", "slug": "x", "path": "../x.md"}]}),
        ),
    ] {
        let root = work.path().join(name);
        let mut manifest = source_folder(&root);
        for (key, value) in change.as_object().unwrap() {
            manifest[key] = value.clone();
        }
        write(
            &root,
            "fermata-export.json",
            manifest.to_string().as_bytes(),
        );
        let (code, text) = run(&target, &["import", &dir(name), "ada/refused"]);
        assert_eq!(code, 2, "{name}: {text}");
        let (code, _) = run(
            &target,
            &["export", "ada/refused", &dir(&format!("{name}-out"))],
        );
        assert_eq!(code, 2, "{name}: the repository was made");
    }

    // The download a member gets from the running server is the export, file for file; an
    // import waits for no server: it is refused while one holds the lease.
    let (status, token, err) = target.run_with_input(&["token", "create", "--user", "ada"], "");
    assert!(status.success(), "{err}");
    let server = target.serve(&[]);
    server.wait_ready().await;
    let address = server.address().await;
    let archive = crate::support::get_bytes(
        address,
        "/api/v1/repositories/ada/notes/export",
        token.trim(),
    );
    let unpacked = work.path().join("download");
    tar::Archive::new(flate2::read::GzDecoder::new(archive.as_slice()))
        .unpack(&unpacked)
        .unwrap();
    let root = std::fs::read_dir(&unpacked)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.join("fermata-export.json").exists())
        .unwrap_or_else(|| unpacked.clone());
    // `first` was changed since; the folder ada/notes came from was not.
    assert_eq!(manifest_of(&root), source);
    assert_eq!(contents(&root), contents(&work.path().join("source")));
    let (code, text) = run(&target, &["import", &dir("first"), "ada/notes"]);
    assert_eq!(code, 3, "{text}");
    server.terminate();
}
