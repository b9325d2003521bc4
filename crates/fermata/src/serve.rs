//! `fermata serve`: take the writer lease, serve HTTP while renewing it, and stop cleanly.
//!
//! The order is deliberate: the schema is checked (and migrated) first, the listener is bound
//! before the lease is taken (so `/healthz` answers while a `--handover wait` process waits, and a
//! port conflict is found without touching the lease), the tenure is opened under the new fencing
//! token, and only then is the process ready. On a graceful stop it drains HTTP, closes its
//! tenure and releases the lease; on a lost lease it drains and exits with code 4.

use std::sync::Arc;

use fermata_accounts::Accounts;
use fermata_collab::{Documents, Media, RoomManager, SWEEP_EVERY, Sweeps, WriterFence};
use fermata_http::{HttpState, Metrics, Phase, Readiness};
use fermata_store::{Lease, Storage, TenureStart};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::ServeSettings;
use crate::failure::{Exit, Failure};
use crate::schema_runtime::SchemaRuntime;
use crate::writer_lease::{self, Keeper, KeeperExit, TakeError};
use crate::{keys, storage};

/// The release, as recorded in tenures and metrics.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Serves until `shutdown` is cancelled or the writer lease is lost.
pub async fn serve(settings: ServeSettings, shutdown: CancellationToken) -> Result<(), Failure> {
    let store = storage::open(&settings.storage).await?;
    storage::prepare_schema(&store, settings.migrate).await?;
    let keyring = Arc::new(keys::handle(&settings.keys)?);
    let shared: Arc<dyn Storage> = Arc::new(store.clone());
    let schema = SchemaRuntime::new(
        Arc::clone(&shared),
        &settings.schema,
        &settings.storage.data_dir,
        Arc::clone(&keyring),
    )
    .await?;
    let accounts = Arc::new(Accounts::new(
        Arc::clone(&shared),
        keyring,
        settings.account_settings(),
    ));

    let listener = TcpListener::bind(settings.listen).await.map_err(|error| {
        Failure::runtime(format!("cannot listen on {}: {error}", settings.listen))
    })?;
    let local = listener
        .local_addr()
        .map_err(|error| Failure::runtime(error.to_string()))?;
    let metrics = Arc::new(Metrics::new(VERSION));
    let readiness = Readiness::default();
    let fence = WriterFence::default();
    let rooms = RoomManager::new(Arc::clone(&shared), fence.clone(), settings.collab);
    let documents = Documents::new(Arc::clone(&shared), fence.clone(), rooms.clone());
    let media = Media::new(Arc::clone(&shared), fence.clone(), settings.media);
    let state = HttpState {
        readiness: readiness.clone(),
        metrics: Arc::clone(&metrics),
        accounts: Arc::clone(&accounts),
        documents,
        media: media.clone(),
        schema: schema.operations.clone(),
        reviews: schema.reviews.clone(),
        registry: schema.registry.clone(),
        schema_setup: fermata_http::SchemaSetup {
            source: settings.schema.source.is_some(),
            package: settings.schema.package.is_some() || settings.schema.github.is_some(),
        },
        secure_cookies: settings.secure_cookies,
        edge: settings.http.edge(local),
    };
    let http_stop = CancellationToken::new();
    let mut http = tokio::spawn(fermata_http::serve(
        listener,
        fermata_http::router(state),
        settings.http.limits.clone(),
        Arc::clone(&metrics),
        http_stop.clone().cancelled_owned(),
    ));
    tracing::info!(listen = %local, storage = store.driver(), "listening");

    readiness.set(Phase::WaitingForLease);
    let holder = writer_lease::holder_name();
    let taken = writer_lease::take(
        store.leases(),
        &holder,
        &settings.lease,
        settings.handover,
        &shutdown,
    )
    .await;
    let granted = match taken {
        Ok(Some(granted)) => granted,
        Ok(None) => {
            http_stop.cancel();
            let _ = http.await;
            return Ok(());
        }
        Err(error) => {
            http_stop.cancel();
            let _ = http.await;
            let exit = match error {
                TakeError::Held(_) => Exit::LeaseHeld,
                TakeError::Store(_) => Exit::Runtime,
            };
            return Err(Failure {
                message: error.to_string(),
                exit,
            });
        }
    };
    let lease = granted.lease.clone();
    metrics.lease_granted(lease.token.0, lease.expires_at.0);
    let start = TenureStart {
        holder: holder.clone(),
        version: VERSION.to_owned(),
    };
    if let Err(error) = store.tenures().open(&lease.fence(), &start).await {
        let _ = store.leases().release(&lease).await;
        http_stop.cancel();
        let _ = http.await;
        return Err(Failure::store(
            "cannot record this process's tenure",
            &error,
        ));
    }
    startup_cleanup(&store, &accounts, &lease).await;
    fence.set(Some(lease.fence()));
    readiness.set(Phase::Serving);
    tracing::info!(
        holder = %holder,
        token = %lease.token,
        expires_at = %lease.expires_at,
        "took the writer lease; serving"
    );

    // Workflow runs (schema operations) execute in the serving process, under the writer lease;
    // the command line executes runs only while no server serves, so step folders left in the
    // data folder now are an earlier process's.
    schema.sweep_scratch().await;
    let worker_stop = CancellationToken::new();
    let mut worker = tokio::spawn({
        let schema = schema.clone();
        let name = holder.clone();
        let stop = worker_stop.clone();
        async move { schema.work(name, stop).await }
    });

    // Rows nobody needs any more (unsent Chat files, expired Planner credentials, idle MCP
    // sessions) are swept now and then periodically while this process holds the lease.
    let sweep_stop = CancellationToken::new();
    let mut sweeper = tokio::spawn({
        let sweeps = Sweeps::new(Arc::clone(&shared), fence.clone());
        let stop = sweep_stop.clone().cancelled_owned();
        async move { sweeps.run(SWEEP_EVERY, stop).await }
    });

    let keeper_stop = CancellationToken::new();
    let mut keeper = tokio::spawn(
        Keeper {
            renewal: store.leases().renewal_channel(),
            lease: granted.lease,
            last_success_sent: granted.sent,
            timings: settings.lease,
            metrics: Arc::clone(&metrics),
        }
        .run(keeper_stop.clone()),
    );

    let lost = tokio::select! {
        () = shutdown.cancelled() => None,
        exit = &mut keeper => Some(exit),
    };
    readiness.set(Phase::Draining);
    if lost.is_some() {
        // Nothing more may be written under a lease that is gone.
        fence.set(None);
    }
    // Rooms checkpoint (while the fence still holds) and close their clients with a retry-later
    // reason, so the HTTP drain is not held up by WebSockets.
    rooms
        .shutdown("the server is stopping; reconnect shortly")
        .await;
    // A sweep in flight may be waiting on a database that no longer answers (a lost lease):
    // it gets the drain timeout, then is cut off, and its transaction rolls back.
    sweep_stop.cancel();
    if tokio::time::timeout(settings.lease.drain_timeout, &mut sweeper)
        .await
        .is_err()
    {
        tracing::warn!("a sweep still in flight after the drain timeout was cut off");
        sweeper.abort();
    }
    // A run in flight gives its claim back; another process resumes it from its journal.
    worker_stop.cancel();
    if tokio::time::timeout(settings.lease.drain_timeout, &mut worker)
        .await
        .is_err()
    {
        tracing::warn!("a workflow run still in flight after the drain timeout was cut off");
        worker.abort();
    }
    http_stop.cancel();
    if tokio::time::timeout(settings.lease.drain_timeout, &mut http)
        .await
        .is_err()
    {
        tracing::warn!("requests still in flight after the drain timeout were cut off");
        http.abort();
    }
    // Requests in flight finished under the fence; nothing writes after this.
    fence.set(None);

    let exit = match lost {
        Some(exit) => exit,
        None => {
            keeper_stop.cancel();
            keeper.await
        }
    };
    match exit {
        Ok(KeeperExit::Stopped(lease)) => {
            if let Err(error) = store.tenures().close(&lease.fence()).await {
                tracing::warn!(error = %error, "could not record the end of this tenure");
            }
            match store.leases().release(&lease).await {
                Ok(_) => tracing::info!(token = %lease.token, "released the writer lease; stopped"),
                Err(error) => {
                    tracing::warn!(error = %error, "could not release the writer lease; it expires by itself")
                }
            }
            metrics.lease_dropped();
            store.close().await;
            Ok(())
        }
        Ok(KeeperExit::Lost(loss)) => {
            tracing::error!(
                reason = loss.reason,
                last_renewed = %humantime::format_rfc3339_millis(loss.last_renewed),
                last_error = loss.last_error.as_deref().unwrap_or("none"),
                "lost the writer lease; stopped serving"
            );
            Err(Failure {
                message: format!("lost the writer lease: {loss}"),
                exit: Exit::LeaseLost,
            })
        }
        Err(join) => Err(Failure::runtime(format!(
            "the writer lease keeper failed: {join}"
        ))),
    }
}

/// Under the new writer lease and before any room opens: runs the startup sequence (sessions a
/// restart cannot keep and Planner owners, child conversations, deferred turns; see
/// [`fermata_collab::startup`]), and tells the operator how to create the first administrator
/// when there is none. A failure here is logged and does not stop the server: the sequence runs
/// again at the next start.
async fn startup_cleanup(store: &dyn Storage, accounts: &Accounts, lease: &Lease) {
    fermata_collab::startup::run(store, &lease.fence()).await;
    match accounts.has_system_admin().await {
        Ok(true) => {}
        Ok(false) => tracing::warn!(
            "no administrator yet: create one with `fermata user add NAME --role system_admin` \
             (add --password-stdin to choose the password; otherwise one is generated and shown once)"
        ),
        Err(error) => tracing::warn!(error = %error, "could not check for an administrator"),
    }
}
