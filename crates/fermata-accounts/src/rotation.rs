//! Re-encrypting stored credentials under the current key, and checking that the loaded keys
//! open every one (after a restore, that the key file travelled with the database).

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

/// How the stored credentials fared under the loaded keys.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SealedCheck {
    pub opened: usize,
    /// Envelopes the loaded keys do not open: sealed under a key that is not loaded, or damaged.
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

    /// Opens every stored credential with the loaded keys, changing nothing.
    pub async fn check_sealed(&self) -> Result<SealedCheck, AccountError> {
        let sessions = self.storage.sessions().sessions_with_credentials().await?;
        let machines = self.storage.machines().machines_with_credentials().await?;
        let envelopes = sessions
            .iter()
            .filter_map(|s| {
                let sealed = s.credentials.as_deref()?;
                Some((Purpose::SessionCredentials, s.id.0.as_str(), sealed))
            })
            .chain(machines.iter().filter_map(|m| {
                let sealed = m.credentials.as_deref()?;
                Some((Purpose::MachineCredentials, m.id.0.as_str(), sealed))
            }));
        let mut check = SealedCheck::default();
        for (purpose, row, sealed) in envelopes {
            match self.keys.open(Aad { purpose, row }, sealed) {
                Ok(_) => check.opened += 1,
                Err(_) => check.undecryptable += 1,
            }
        }
        Ok(check)
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
