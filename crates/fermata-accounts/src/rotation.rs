//! Re-encrypting stored credentials under the current key.

use fermata_crypto::{Aad, Keyring, Purpose};
use fermata_store::{ErrorKind, Machine, MachineId, Session, SessionId, StoreResult};

use crate::{AccountError, Accounts};

/// What a re-encryption pass changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reencrypted {
    pub sessions: usize,
    pub machines: usize,
    /// Envelopes already under the current key.
    pub current: usize,
    /// Envelopes that could not be opened (damaged, or sealed with a key no longer loaded): left
    /// as they are, and counted so the operator hears of them.
    pub undecryptable: usize,
}

/// What one pass over one kind of row did.
#[derive(Default)]
struct Pass {
    resealed: usize,
    current: usize,
    undecryptable: usize,
}

/// How many times one row is retried when it changes under the pass.
const ATTEMPTS: usize = 3;

impl Accounts {
    /// Re-seals every stored credential that is not under the current key version. Each row is
    /// rewritten with a revision check, so a concurrent change is never overwritten: the row is
    /// read again and re-sealed instead.
    pub async fn reencrypt_all(&self) -> Result<Reencrypted, AccountError> {
        let storage = &self.storage;
        let sessions = storage.sessions().sessions_with_credentials().await?;
        let session_pass = self
            .reseal_rows(
                sessions,
                Purpose::SessionCredentials,
                |s: &Session| (s.id.0.as_str(), s.revision, s.credentials.as_deref()),
                async |id: &str, revision, sealed: &[u8]| {
                    let id = SessionId(id.to_owned());
                    storage
                        .sessions()
                        .rotate_session_credentials(&id, revision, Some(sealed))
                        .await
                        .map(|_| ())
                },
                async |id: &str| {
                    let id = SessionId(id.to_owned());
                    Ok(storage
                        .sessions()
                        .session(&id)
                        .await?
                        .map(|lookup| lookup.session))
                },
            )
            .await?;
        let machines = storage.machines().machines_with_credentials().await?;
        let machine_pass = self
            .reseal_rows(
                machines,
                Purpose::MachineCredentials,
                |m: &Machine| (m.id.0.as_str(), m.revision, m.credentials.as_deref()),
                async |id: &str, revision, sealed: &[u8]| {
                    let id = MachineId(id.to_owned());
                    storage
                        .machines()
                        .rotate_machine_credentials(&id, revision, Some(sealed))
                        .await
                        .map(|_| ())
                },
                async |id: &str| storage.machines().machine(&MachineId(id.to_owned())).await,
            )
            .await?;
        Ok(Reencrypted {
            sessions: session_pass.resealed,
            machines: machine_pass.resealed,
            current: session_pass.current + machine_pass.current,
            undecryptable: session_pass.undecryptable + machine_pass.undecryptable,
        })
    }

    /// Re-seals `rows` under the current key; returns how many were re-sealed and how many were
    /// already current. `view` gives a row's ID, revision and envelope; `rotate` writes a new
    /// envelope if the revision still holds; `reread` fetches a row that changed meanwhile.
    async fn reseal_rows<T>(
        &self,
        rows: Vec<T>,
        purpose: Purpose,
        view: impl Fn(&T) -> (&str, i64, Option<&[u8]>),
        rotate: impl AsyncFn(&str, i64, &[u8]) -> StoreResult<()>,
        reread: impl AsyncFn(&str) -> StoreResult<Option<T>>,
    ) -> Result<Pass, AccountError> {
        let keyring = self.keys.keyring();
        let current = keyring.current_version();
        let mut pass = Pass::default();
        for row in rows {
            let mut candidate = Some(row);
            for _ in 0..ATTEMPTS {
                let Some(row) = candidate.take() else { break };
                let (id, revision, sealed) = view(&row);
                let Some(sealed) = sealed else { break };
                // A newer version than this pass's key means another process already rotated
                // further: the row is left under the newer key, never moved back.
                if Keyring::envelope_version(sealed).is_ok_and(|version| version >= current) {
                    pass.current += 1;
                    break;
                }
                let aad = Aad { purpose, row: id };
                // One damaged row must not stop the others from moving to the new key.
                let Ok(plain) = self.keys.open(aad, sealed) else {
                    tracing::warn!(
                        row = id,
                        "a stored credential could not be decrypted; left as it is"
                    );
                    pass.undecryptable += 1;
                    break;
                };
                match rotate(id, revision, &keyring.seal(aad, &plain)).await {
                    Ok(()) => pass.resealed += 1,
                    Err(error) if error.kind() == ErrorKind::Conflict => {
                        candidate = reread(id).await?
                    }
                    Err(error) if error.kind() == ErrorKind::Missing => {}
                    Err(error) => return Err(error.into()),
                }
            }
        }
        Ok(pass)
    }
}
