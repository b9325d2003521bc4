//! Re-encrypting stored credentials under the current key, and the startup sweep of sessions.

use fermata_crypto::Keyring;
use fermata_store::{ErrorKind, Fence, SessionSweep};

use crate::machines::aad_of_machine;
use crate::sessions::aad_of_session;
use crate::{AccountError, Accounts};

/// What a re-encryption pass changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reencrypted {
    pub sessions: usize,
    pub machines: usize,
    /// Envelopes already under the current key.
    pub current: usize,
}

/// How many times one row is retried when it changes under the pass.
const ATTEMPTS: usize = 3;

impl Accounts {
    /// Re-seals every stored credential that is not under the current key version. Each row is
    /// rewritten with a revision check, so a concurrent change is never overwritten: the row is
    /// read again and re-sealed instead.
    pub async fn reencrypt_all(&self) -> Result<Reencrypted, AccountError> {
        let keyring = self.keys.keyring();
        let current = keyring.current_version();
        let mut report = Reencrypted::default();
        for session in self.storage.sessions().sessions_with_credentials().await? {
            let mut candidate = Some(session);
            for _ in 0..ATTEMPTS {
                let Some(session) = candidate.take() else {
                    break;
                };
                let Some(sealed) = &session.credentials else {
                    break;
                };
                if Keyring::envelope_version(sealed)? == current {
                    report.current += 1;
                    break;
                }
                let plain = self.keys.open(aad_of_session(&session.id), sealed)?;
                let resealed = keyring.seal(aad_of_session(&session.id), &plain);
                match self
                    .storage
                    .sessions()
                    .rotate_session_credentials(&session.id, session.revision, Some(&resealed))
                    .await
                {
                    Ok(_) => report.sessions += 1,
                    Err(error) if error.kind() == ErrorKind::Conflict => {
                        candidate = self
                            .storage
                            .sessions()
                            .session(&session.id)
                            .await?
                            .map(|l| l.session);
                    }
                    Err(error) if error.kind() == ErrorKind::Missing => {}
                    Err(error) => return Err(error.into()),
                }
            }
        }
        for machine in self.storage.machines().machines_with_credentials().await? {
            let mut candidate = Some(machine);
            for _ in 0..ATTEMPTS {
                let Some(machine) = candidate.take() else {
                    break;
                };
                let Some(sealed) = &machine.credentials else {
                    break;
                };
                if Keyring::envelope_version(sealed)? == current {
                    report.current += 1;
                    break;
                }
                let plain = self.keys.open(aad_of_machine(&machine.id), sealed)?;
                let resealed = keyring.seal(aad_of_machine(&machine.id), &plain);
                match self
                    .storage
                    .machines()
                    .rotate_machine_credentials(&machine.id, machine.revision, Some(&resealed))
                    .await
                {
                    Ok(_) => report.machines += 1,
                    Err(error) if error.kind() == ErrorKind::Conflict => {
                        candidate = self.storage.machines().machine(&machine.id).await?;
                    }
                    Err(error) if error.kind() == ErrorKind::Missing => {}
                    Err(error) => return Err(error.into()),
                }
            }
        }
        Ok(report)
    }

    /// Removes expired and metadata-only sessions, under the writer lease. Idempotent.
    pub async fn startup_sweep(&self, fence: &Fence) -> Result<SessionSweep, AccountError> {
        Ok(self.storage.sessions().sweep_sessions(fence).await?)
    }
}
