//! Revision-checked writes: read a row, write it at the revision read, and try again when
//! another change to the same row won in between.

use fermata_store::{ErrorKind, StoreResult};

use crate::AccountError;

/// How many times a revision-checked write is tried.
const ATTEMPTS: usize = 3;

/// Runs `attempt` (which reads the row and returns the result of writing it at the revision it
/// read) until the write meets no concurrent change, at most [`ATTEMPTS`] times. A row that is
/// gone is `NotFound(what)`.
pub(crate) async fn at_read_revision<T, F, A>(
    what: &'static str,
    mut attempt: F,
) -> Result<T, AccountError>
where
    F: FnMut() -> A,
    A: Future<Output = Result<StoreResult<T>, AccountError>>,
{
    for _ in 0..ATTEMPTS {
        match attempt().await? {
            Ok(written) => return Ok(written),
            Err(error) if error.kind() == ErrorKind::Conflict => {}
            Err(error) if error.kind() == ErrorKind::Missing => {
                return Err(AccountError::NotFound(what));
            }
            Err(error) => return Err(error.into()),
        }
    }
    Err(AccountError::Conflict(format!(
        "the {what} kept changing; try again"
    )))
}
