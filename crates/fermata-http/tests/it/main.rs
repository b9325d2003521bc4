//! The integration tests of `fermata-http`, as one test binary: one module per subject, the
//! shared helpers beside them. One binary links once, where a binary per file linked each.

mod support;

mod access;
mod admin_page;
mod auth;
mod document_pages;
mod documents;
mod forwarding;
mod headers;
mod images;
mod limits;
mod schema;
mod search;
mod search_pages;
