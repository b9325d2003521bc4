//! Credentials a paired machine hands to a Planner backend for one document. The secret leaves
//! the server only after its SHA-256 digest is recorded under the writer lease; the database
//! never holds the secret itself.

use std::time::Duration;

use fermata_crypto::SecretToken;
use fermata_store::{ChannelId, Fence, Machine, NewPlannerCredential, PlannerCredential};

use crate::sessions::hash_of;
use crate::{AccountError, Accounts, PLANNER_CREDENTIAL_PREFIX};

impl Accounts {
    /// Makes a credential for `machine`'s Planner backend on `channel`, valid for `ttl`: records
    /// its digest first and returns the secret only once that write succeeded, so a failed or
    /// fenced write hands nothing out.
    pub async fn issue_planner_credential(
        &self,
        fence: &Fence,
        machine: &Machine,
        channel: &ChannelId,
        ttl: Duration,
    ) -> Result<(PlannerCredential, SecretToken), AccountError> {
        let secret = SecretToken::generate(PLANNER_CREDENTIAL_PREFIX);
        let recorded = self
            .storage
            .planner()
            .record_planner_credential(
                fence,
                &NewPlannerCredential {
                    digest: hash_of(&secret),
                    machine: machine.id.clone(),
                    channel: channel.clone(),
                    ttl,
                },
            )
            .await?;
        tracing::info!(machine = %machine.id, document = %channel, "issued a Planner credential");
        Ok((recorded, secret))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Arc;

    use fermata_crypto::Keyring;
    use fermata_store::{
        Acquisition, ErrorKind, LeaseName, MachineId, NewChannel, NewMachine, NewUser, Repository,
        SecretHash, Storage, StoreOptions, UserId, UserName,
    };
    use fermata_store_testkit::memory::MemoryStorage;

    use super::*;
    use crate::{AccountSettings, KeyringHandle};

    const LONG: Duration = Duration::from_secs(3600);

    async fn setup() -> (
        Accounts,
        Arc<dyn Storage>,
        fermata_store::Lease,
        Machine,
        ChannelId,
    ) {
        let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new(StoreOptions::default()));
        let Ok(Acquisition::Granted(lease)) = storage
            .leases()
            .acquire(&LeaseName::new("writer").unwrap(), "test", LONG)
            .await
        else {
            panic!("the lease is free");
        };
        let owner = UserId("ada".to_owned());
        storage
            .users()
            .create_user(&NewUser {
                id: owner.clone(),
                name: UserName::new("ada").unwrap(),
                password_hash: "$argon2id$x".to_owned(),
                roles: BTreeSet::new(),
            })
            .await
            .unwrap();
        let machine = storage
            .machines()
            .pair_machine(&NewMachine {
                id: MachineId("m1".to_owned()),
                owner,
                name: "laptop".to_owned(),
                secret_hash: SecretHash([1; 32]),
            })
            .await
            .unwrap();
        let channel = storage
            .collaboration()
            .create_channel(
                &lease.fence(),
                &NewChannel {
                    id: ChannelId::random(),
                    repository: Repository::new("acme/app").unwrap(),
                    title: "Doc".to_owned(),
                    parent: None,
                },
            )
            .await
            .unwrap()
            .id;
        let keys = Arc::new(KeyringHandle::new(Keyring::generate(), None));
        let accounts = Accounts::new(Arc::clone(&storage), keys, AccountSettings::default());
        (accounts, storage, lease, machine, channel)
    }

    #[tokio::test]
    async fn the_digest_is_recorded_before_the_secret_is_returned() {
        let (accounts, storage, lease, machine, channel) = setup().await;
        let (recorded, secret) = accounts
            .issue_planner_credential(&lease.fence(), &machine, &channel, LONG)
            .await
            .unwrap();
        assert!(secret.expose().starts_with(PLANNER_CREDENTIAL_PREFIX));
        assert_eq!(recorded.digest, hash_of(&secret));
        let stored = storage
            .planner()
            .planner_credential(&hash_of(&secret))
            .await
            .unwrap();
        assert_eq!(stored, Some(recorded));
    }

    #[tokio::test]
    async fn a_fenced_write_hands_no_secret_out() {
        let (accounts, storage, lease, machine, channel) = setup().await;
        storage.leases().release(&lease).await.unwrap();
        let error = accounts
            .issue_planner_credential(&lease.fence(), &machine, &channel, LONG)
            .await
            .unwrap_err();
        let AccountError::Store(error) = error else {
            panic!("expected the store's refusal, got {error:?}");
        };
        assert_eq!(error.kind(), ErrorKind::Fenced);
    }
}
