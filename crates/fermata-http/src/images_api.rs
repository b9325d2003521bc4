//! A document's images and Chat attachments under `/api/v1/documents/{id}`, with the same
//! authorization as the documents API: viewers read them (so do the document's client tokens),
//! editors upload and send them.
//!
//! Uploads are the raw bytes of the file as the request body; the type is sniffed from the
//! bytes, never taken from `Content-Type` or a name. Files are served with the sniffed type,
//! `X-Content-Type-Options: nosniff` and a sandboxing `Content-Security-Policy`, so a file can
//! never run as a page of this origin. A document's image is addressed by the SHA-256 of its
//! bytes and, like every authenticated answer, never cached (`no-store`); `?w=` asks for a
//! thumbnail at one of Slack's widths (any other width is a 400 `invalid_width`).

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use fermata_collab::{ImageSource, MediaFailure, ServedFile, UploadReservation};
use fermata_media::{MediaError, Width};
use fermata_store::{
    AttachmentId, AttachmentInfo, ImageHash, ImageInfo, MessageRequestId, OriginalFile,
    RepositoryRole, UserId,
};
use serde::{Deserialize, Serialize};

use crate::HttpState;
use crate::documents_api::ApiQuery;
use crate::error::ApiError;
use crate::policy::{Access, DocumentGrant, Routes};

pub(crate) fn routes() -> Routes {
    let read = Access::Document {
        need: RepositoryRole::Viewer,
        client_tokens: true,
    };
    let write = Access::Document {
        need: RepositoryRole::Editor,
        client_tokens: false,
    };
    let images = "/api/v1/documents/{id}/images";
    let message = "/api/v1/documents/{id}/messages/{request_id}/attachments";
    Routes::new()
        .post(images, write, upload_image)
        .get(images, read, list_images)
        .get("/api/v1/documents/{id}/images/{sha256}", read, read_image)
        .post(
            "/api/v1/documents/{id}/attachments",
            write,
            upload_attachment,
        )
        .get(
            "/api/v1/documents/{id}/attachments/{attachment}",
            read,
            read_attachment,
        )
        .post(message, write, send)
        .get(message, read, of_message)
        .delete(message, write, delete_message)
}

/// The user an upload or a read is for: a client token's holder is no user.
fn user_of(grant: &DocumentGrant) -> Result<UserId, ApiError> {
    grant
        .caller
        .user_id()
        .ok_or_else(|| ApiError::forbidden("a client token cannot do this"))
}

/// What a stored file may do in a browser: nothing. It is shown as an image or text, never run.
const SANDBOX: &str = "default-src 'none'; sandbox";

impl From<MediaFailure> for ApiError {
    fn from(failure: MediaFailure) -> Self {
        match failure {
            MediaFailure::Store(error) => error.into(),
            MediaFailure::Refused(refusal) => {
                let (status, code) = match &refusal {
                    MediaError::TooLarge { .. } | MediaError::CannotShrink { .. } => {
                        (StatusCode::PAYLOAD_TOO_LARGE, "too_large")
                    }
                    MediaError::Unsupported { .. }
                    | MediaError::Markup
                    | MediaError::NotPlainText => {
                        (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_type")
                    }
                    MediaError::Malformed { .. } => {
                        (StatusCode::UNPROCESSABLE_ENTITY, "malformed_image")
                    }
                    MediaError::OverDecodeLimits | MediaError::OverInflated { .. } => (
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "image_too_large_to_decode",
                    ),
                    MediaError::UnknownWidth => (StatusCode::BAD_REQUEST, "invalid_width"),
                    MediaError::Encode { .. } => {
                        (StatusCode::INTERNAL_SERVER_ERROR, "encode_failed")
                    }
                };
                let answer = ApiError::new(status, code, refusal.to_string());
                if status.is_server_error() {
                    answer.with_source(refusal)
                } else {
                    answer
                }
            }
            MediaFailure::Busy { retry_after } => {
                let mut error =
                    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "busy", failure.to_string());
                error.retry_after = Some(fermata_accounts::retry_after_seconds(retry_after));
                error
            }
            MediaFailure::Interrupted => ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "interrupted",
                failure.to_string(),
            )
            .with_source(failure),
        }
    }
}

/// The raw request body, refused as too large before it is all read, and read only once the
/// upload buffer has room for it (the reservation is held until the upload is handled).
async fn body_bytes(
    state: &HttpState,
    request: Request,
) -> Result<(Vec<u8>, UploadReservation), ApiError> {
    let limit = state.media.settings().max_input_bytes;
    let too_large = |size: usize| -> ApiError {
        MediaFailure::Refused(MediaError::TooLarge { size, limit }).into()
    };
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if let Some(size) = declared.filter(|size| *size > limit) {
        return Err(too_large(size));
    }
    let reservation = state.media.reserve_upload(declared).await?;
    // Dropped on purpose: reading stops only at the limit, which the answer names.
    let bytes = axum::body::to_bytes(request.into_body(), limit)
        .await
        .map_err(|_| too_large(limit + 1))?;
    Ok((bytes.to_vec(), reservation))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WidthQuery {
    w: Option<u32>,
}

fn width(query: &WidthQuery) -> Result<Option<Width>, ApiError> {
    query
        .w
        .map(Width::new)
        .transpose()
        .map_err(|refusal| MediaFailure::Refused(refusal).into())
}

/// The bytes of a file, with the headers that keep a browser from treating them as anything
/// but what they are.
fn file_response(file: ServedFile, name: Option<&str>) -> Response {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(file.media_type.content_type()),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(SANDBOX),
    );
    // Like every authenticated answer: a browser keeps no copy of a document's files.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    let disposition = match name {
        Some(name) => format!("inline; filename*=UTF-8''{}", percent_encode(name)),
        None => "inline".to_owned(),
    };
    if let Ok(value) = HeaderValue::from_str(&disposition) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    (StatusCode::OK, headers, Body::from(file.bytes)).into_response()
}

/// RFC 5987 encoding of a file name: every byte but unreserved ASCII as `%XX`.
fn percent_encode(name: &str) -> String {
    use std::fmt::Write as _;
    name.bytes().fold(String::new(), |mut out, byte| {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
        out
    })
}

/// A document's image as the API shows it.
#[derive(Debug, Serialize)]
struct ImageView {
    sha256: String,
    #[serde(rename = "type")]
    image_type: &'static str,
    size: i64,
    /// Where to read it; add `?w=` for a thumbnail.
    address: String,
    stored_by: String,
    stored_at: String,
}

impl From<&ImageInfo> for ImageView {
    fn from(info: &ImageInfo) -> Self {
        ImageView {
            sha256: info.sha256.to_string(),
            image_type: info.image_type.as_str(),
            size: info.size,
            address: format!("/api/v1/documents/{}/images/{}", info.channel, info.sha256),
            stored_by: info.stored_by.clone(),
            stored_at: info.stored_at.to_string(),
        }
    }
}

#[derive(Debug, Serialize)]
struct UploadedImage {
    #[serde(flatten)]
    image: ImageView,
    /// What was sent, when what is stored is a smaller copy of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    original: Option<OriginalView>,
}

#[derive(Debug, Serialize)]
struct OriginalView {
    size: i64,
    width: i64,
    height: i64,
}

impl From<OriginalFile> for OriginalView {
    fn from(original: OriginalFile) -> Self {
        OriginalView {
            size: original.size,
            width: original.width,
            height: original.height,
        }
    }
}

async fn upload_image(
    State(state): State<HttpState>,
    grant: DocumentGrant,
    request: Request,
) -> Result<Response, ApiError> {
    let user = user_of(&grant)?;
    let (bytes, _reservation) = body_bytes(&state, request).await?;
    let stored_by = format!("user:{user}");
    let upload = state
        .media
        .store_image(grant.id(), ImageSource::Upload, stored_by, bytes)
        .await?;
    let status = if upload.stored.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let body = UploadedImage {
        image: ImageView::from(&upload.stored.info),
        original: upload.original.map(OriginalView::from),
    };
    Ok((status, Json(body)).into_response())
}

async fn list_images(
    State(state): State<HttpState>,
    grant: DocumentGrant,
) -> Result<Json<Vec<ImageView>>, ApiError> {
    let images = state.media.images_of(grant.id()).await?;
    Ok(Json(images.iter().map(ImageView::from).collect()))
}

fn no_image() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such image")
}

async fn read_image(
    State(state): State<HttpState>,
    grant: DocumentGrant,
    Path((_, sha256)): Path<(String, String)>,
    ApiQuery(query): ApiQuery<WidthQuery>,
) -> Result<Response, ApiError> {
    let id = grant.id();
    // Dropped on purpose: text that is not a hash names no image.
    let sha256 = ImageHash::parse(&sha256).map_err(|_| no_image())?;
    let width = width(&query)?;
    let file = state
        .media
        .image(id, &sha256, width)
        .await?
        .ok_or_else(no_image)?;
    Ok(file_response(file, None))
}

/// An attachment as the API shows it.
#[derive(Debug, Serialize)]
struct AttachmentView {
    id: String,
    document: String,
    #[serde(rename = "type")]
    attachment_type: &'static str,
    name: String,
    size: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    original: Option<OriginalView>,
    uploaded_by: String,
    uploaded_at: String,
    /// The message it was sent with; absent until then.
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<PlaceView>,
    address: String,
}

#[derive(Debug, Serialize)]
struct PlaceView {
    request_id: String,
    place: i64,
}

impl From<&AttachmentInfo> for AttachmentView {
    fn from(info: &AttachmentInfo) -> Self {
        AttachmentView {
            id: info.id.to_string(),
            document: info.channel.to_string(),
            attachment_type: info.attachment_type.as_str(),
            name: info.name.clone(),
            size: info.size,
            original: info.original.map(OriginalView::from),
            uploaded_by: info.uploaded_by.to_string(),
            uploaded_at: info.uploaded_at.to_string(),
            message: info.message.as_ref().map(|at| PlaceView {
                request_id: at.request_id.to_string(),
                place: at.place,
            }),
            address: format!("/api/v1/documents/{}/attachments/{}", info.channel, info.id),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UploadQuery {
    name: String,
    /// What the sender's file was, where the browser sent a smaller copy: all three or none.
    original_size: Option<i64>,
    original_width: Option<i64>,
    original_height: Option<i64>,
}

async fn upload_attachment(
    State(state): State<HttpState>,
    grant: DocumentGrant,
    ApiQuery(query): ApiQuery<UploadQuery>,
    request: Request,
) -> Result<Response, ApiError> {
    let user = user_of(&grant)?;
    let original = match (
        query.original_size,
        query.original_width,
        query.original_height,
    ) {
        (Some(size), Some(width), Some(height)) => Some(OriginalFile {
            size,
            width,
            height,
        }),
        (None, None, None) => None,
        _ => {
            return Err(ApiError::bad_request(
                "original_size, original_width and original_height go together",
            ));
        }
    };
    let (bytes, _reservation) = body_bytes(&state, request).await?;
    let info = state
        .media
        .upload_attachment(grant.id(), &user, query.name, bytes, original)
        .await?;
    Ok((StatusCode::CREATED, Json(AttachmentView::from(&info))).into_response())
}

fn no_attachment() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such attachment")
}

async fn read_attachment(
    State(state): State<HttpState>,
    grant: DocumentGrant,
    Path((_, attachment)): Path<(String, String)>,
    ApiQuery(query): ApiQuery<WidthQuery>,
) -> Result<Response, ApiError> {
    // A client token's holder reads sent attachments only: no uploader has an empty ID.
    let reader = grant.caller.user_id().unwrap_or(UserId(String::new()));
    // Dropped on purpose: text that is not an attachment ID names no attachment.
    let attachment = AttachmentId::parse(&attachment).map_err(|_| no_attachment())?;
    let width = width(&query)?;
    let (info, file) = state
        .media
        .attachment(grant.id(), &attachment, &reader, width)
        .await?
        .ok_or_else(no_attachment)?;
    Ok(file_response(file, Some(&info.name)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SendBody {
    attachments: Vec<String>,
}

fn request_id(text: String) -> Result<MessageRequestId, ApiError> {
    MessageRequestId::new(text).map_err(ApiError::from)
}

async fn send(
    State(state): State<HttpState>,
    grant: DocumentGrant,
    Path((_, request_id_text)): Path<(String, String)>,
    request: Request,
) -> Result<Json<Vec<AttachmentView>>, ApiError> {
    let user = user_of(&grant)?;
    let request_id = request_id(request_id_text)?;
    let body: SendBody = crate::documents_api::json_body(request).await?;
    let attachments = body
        .attachments
        .iter()
        .map(|text| {
            // Dropped on purpose: the answer says what an attachment ID is.
            AttachmentId::parse(text)
                .map_err(|_| ApiError::bad_request("an attachment ID is a UUID"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let sent = state
        .media
        .send(grant.id(), &user, &request_id, &attachments)
        .await?;
    Ok(Json(sent.iter().map(AttachmentView::from).collect()))
}

async fn of_message(
    State(state): State<HttpState>,
    grant: DocumentGrant,
    Path((_, request_id_text)): Path<(String, String)>,
) -> Result<Json<Vec<AttachmentView>>, ApiError> {
    let request_id = request_id(request_id_text)?;
    let files = state.media.of_message(grant.id(), &request_id).await?;
    Ok(Json(files.iter().map(AttachmentView::from).collect()))
}

#[derive(Serialize)]
struct Removed {
    removed: u64,
}

async fn delete_message(
    State(state): State<HttpState>,
    grant: DocumentGrant,
    Path((_, request_id_text)): Path<(String, String)>,
) -> Result<Json<Removed>, ApiError> {
    let request_id = request_id(request_id_text)?;
    let removed = state.media.delete_message(grant.id(), &request_id).await?;
    Ok(Json(Removed { removed }))
}
