//! The integration tests of `fermata-media`, as one test binary: one module per subject, the
//! shared helpers beside them. One binary links once, where a binary per file linked each.

mod support;

mod hidden_markup;
mod smaller_copy;
mod sniffing;
mod thumbnails;
