//! `GET /api/v1/repositories/{owner}/{name}/export`: a repository as a `.tar.gz` download for
//! its members (the repository page links to it), holding what `fermata export` writes into a
//! folder, made by the same code. The archive is streamed: the export writes one file at a time
//! into the tar and gzip encoders on the blocking pool, whose output goes to the response
//! through a short channel, so memory holds one document or image and a few chunks, and a slow
//! reader slows the export instead of filling memory. A failure after the first bytes were sent
//! can only end the stream early; the client then holds a truncated archive, which gzip refuses.

use std::io::Write;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use fermata_collab::repository_files::{self, ExportSink};
use fermata_store::{ErrorChain, RepositoryRole};
use flate2::Compression;
use flate2::write::GzEncoder;
use http_body::Frame;
use tokio::sync::mpsc;

use crate::HttpState;
use crate::error::ApiError;
use crate::policy::{Access, RepositoryGrant, Routes};

/// Chunks of the archive waiting for the reader.
const CHUNKS_IN_FLIGHT: usize = 8;

pub(crate) fn routes() -> Routes {
    Routes::new().get(
        "/api/v1/repositories/{owner}/{name}/export",
        Access::Repository {
            need: RepositoryRole::Viewer,
        },
        export,
    )
}

async fn export(
    State(state): State<HttpState>,
    grant: RepositoryGrant,
) -> Result<Response, ApiError> {
    let repository = grant.repository;
    // Listing first, so a repository that cannot be read answers with an error, not a stream.
    let manifest =
        repository_files::manifest_of(&state.documents, &state.media, &repository).await?;
    let (chunks, body) = mpsc::channel(CHUNKS_IN_FLIGHT);
    let file_name = format!("{}.tar.gz", repository.as_str().replace('/', "-"));
    tokio::spawn(async move {
        let mut sink = TarSink {
            builder: Some(tar::Builder::new(GzEncoder::new(
                ChunkWriter(chunks),
                Compression::default(),
            ))),
        };
        let written = repository_files::write_files(
            &state.documents,
            &state.media,
            &manifest,
            &mut sink,
            |_| {},
        )
        .await;
        let finished = match written {
            Ok(_) => sink.finish().await,
            Err(error) => Err(std::io::Error::other(error)),
        };
        if let Err(error) = finished {
            tracing::warn!(repository = %repository, error = %ErrorChain(&error), "the repository download stopped early");
        }
    });
    let disposition = HeaderValue::from_str(&format!("attachment; filename=\"{file_name}\""))
        .unwrap_or_else(|_| HeaderValue::from_static("attachment"));
    Ok((
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/gzip"),
            ),
            (header::CONTENT_DISPOSITION, disposition),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        Body::new(ChunkBody(body)),
    )
        .into_response())
}

/// The archive's bytes as they are made, sent to the response; a reader gone is a broken pipe.
struct ChunkWriter(mpsc::Sender<Bytes>);

impl Write for ChunkWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        // Runs on the blocking pool (see `TarSink`), where waiting for the reader is allowed.
        self.0
            .blocking_send(Bytes::copy_from_slice(bytes))
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The response body: the chunks as they come, ending when the export drops its sender.
struct ChunkBody(mpsc::Receiver<Bytes>);

impl http_body::Body for ChunkBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.0
            .poll_recv(cx)
            .map(|chunk| chunk.map(|bytes| Ok(Frame::data(bytes))))
    }
}

/// Files appended to a tar in gzip, each on the blocking pool.
struct TarSink {
    /// Taken while an append runs on the blocking pool.
    builder: Option<tar::Builder<GzEncoder<ChunkWriter>>>,
}

impl TarSink {
    async fn finish(mut self) -> std::io::Result<()> {
        let builder = self.builder.take().ok_or_else(interrupted)?;
        tokio::task::spawn_blocking(move || builder.into_inner()?.finish().map(drop))
            .await
            .map_err(std::io::Error::other)?
    }
}

fn interrupted() -> std::io::Error {
    std::io::Error::other("an earlier write to the archive failed")
}

impl ExportSink for TarSink {
    async fn put(&mut self, path: &str, bytes: Vec<u8>) -> std::io::Result<()> {
        let mut builder = self.builder.take().ok_or_else(interrupted)?;
        let path = path.to_owned();
        let builder = tokio::task::spawn_blocking(move || {
            let mut header = tar::Header::new_gnu();
            header.set_size(bytes.len() as u64);
            header.set_mode(0o644);
            header.set_entry_type(tar::EntryType::Regular);
            builder.append_data(&mut header, path, bytes.as_slice())?;
            Ok::<_, std::io::Error>(builder)
        })
        .await
        .map_err(std::io::Error::other)??;
        self.builder = Some(builder);
        Ok(())
    }
}
