//! Paired machines: pairing, recognising a machine by its token, re-authorization, revocation by
//! the owner, and the credentials a machine holds.

use fermata_crypto::{Aad, Purpose, SecretToken};
use fermata_store::{ErrorKind, Machine, MachineId, NewMachine, User, UserId};

use crate::credentials::Credentials;
use crate::revision::at_read_revision;
use crate::sessions::hash_of;
use crate::{AccountError, Accounts, MACHINE_TOKEN_PREFIX, check_label, new_id};

impl Accounts {
    /// Pairs a new machine for `owner`. Its token is returned once and never stored.
    pub async fn pair_machine(
        &self,
        owner: &User,
        name: &str,
    ) -> Result<(Machine, SecretToken), AccountError> {
        let name = check_label(name, "machine name")?;
        let _issuing = self.issuing.lock().await;
        let paired = self.storage.machines().machines_of(&owner.id).await?.len();
        if paired >= self.settings.max_machines {
            tracing::warn!(owner = %owner.name, paired, "refused a machine over the cap");
            return Err(AccountError::TooMany(format!(
                "a user pairs at most {} machines: revoke one first",
                self.settings.max_machines
            )));
        }
        let secret = SecretToken::generate(MACHINE_TOKEN_PREFIX);
        let machine = self
            .storage
            .machines()
            .pair_machine(&NewMachine {
                id: MachineId(new_id()),
                owner: owner.id.clone(),
                name: name.to_owned(),
                secret_hash: hash_of(&secret),
            })
            .await?;
        tracing::info!(owner = %owner.name, machine = %machine.id, "paired a machine");
        Ok((machine, secret))
    }

    /// The machine a token belongs to.
    pub async fn authenticate_machine(
        &self,
        secret: &SecretToken,
    ) -> Result<Option<Machine>, AccountError> {
        if !secret.expose().starts_with(MACHINE_TOKEN_PREFIX) {
            return Ok(None);
        }
        Ok(self
            .storage
            .machines()
            .machine_by_secret(&hash_of(secret))
            .await?)
    }

    pub async fn machines(&self, owner: &UserId) -> Result<Vec<Machine>, AccountError> {
        Ok(self.storage.machines().machines_of(owner).await?)
    }

    /// Issues a new token for one of `owner`'s machines; the old token stops working.
    pub async fn reauthorize_machine(
        &self,
        owner: &User,
        id: &MachineId,
    ) -> Result<(Machine, SecretToken), AccountError> {
        let (machine, secret) = at_read_revision("machine", || async move {
            let machine = self.owned_machine(owner, id).await?;
            let secret = SecretToken::generate(MACHINE_TOKEN_PREFIX);
            Ok(self
                .storage
                .machines()
                .reauthorize_machine(id, &owner.id, machine.revision, &hash_of(&secret))
                .await
                .map(|machine| (machine, secret)))
        })
        .await?;
        tracing::info!(owner = %owner.name, machine = %machine.id, "re-authorized a machine");
        Ok((machine, secret))
    }

    /// Revokes one of `owner`'s machines, discarding its credentials. Someone else's machine is
    /// `NotFound`, as if it did not exist.
    pub async fn revoke_machine(&self, owner: &User, id: &MachineId) -> Result<(), AccountError> {
        match self.storage.machines().revoke_machine(id, &owner.id).await {
            Ok(()) => {
                tracing::info!(owner = %owner.name, machine = %id, "revoked a machine");
                Ok(())
            }
            Err(error) if error.kind() == ErrorKind::Missing => {
                Err(AccountError::NotFound("machine"))
            }
            Err(error) => Err(error.into()),
        }
    }

    /// Replaces a machine's credentials (all of them; an empty set clears them).
    pub async fn set_machine_credentials(
        &self,
        id: &MachineId,
        credentials: &Credentials,
    ) -> Result<Machine, AccountError> {
        let sealed = (!credentials.is_empty()).then(|| {
            self.keys
                .seal(aad_of_machine(id), &credentials.to_plaintext())
        });
        let sealed = sealed.as_deref();
        at_read_revision("machine", || async move {
            let machine = self
                .storage
                .machines()
                .machine(id)
                .await?
                .ok_or(AccountError::NotFound("machine"))?;
            Ok(self
                .storage
                .machines()
                .rotate_machine_credentials(id, machine.revision, sealed)
                .await)
        })
        .await
    }

    /// The credentials a machine holds, decrypted.
    pub async fn machine_credentials(&self, id: &MachineId) -> Result<Credentials, AccountError> {
        let machine = self
            .storage
            .machines()
            .machine(id)
            .await?
            .ok_or(AccountError::NotFound("machine"))?;
        Credentials::unseal(
            &self.keys,
            aad_of_machine(id),
            machine.credentials.as_deref(),
        )
    }

    async fn owned_machine(&self, owner: &User, id: &MachineId) -> Result<Machine, AccountError> {
        self.storage
            .machines()
            .machine(id)
            .await?
            .filter(|machine| machine.owner == owner.id)
            .ok_or(AccountError::NotFound("machine"))
    }
}

fn aad_of_machine(id: &MachineId) -> Aad<'_> {
    Aad {
        purpose: Purpose::MachineCredentials,
        row: &id.0,
    }
}
