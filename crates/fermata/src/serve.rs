//! `fermata serve`: take the writer lease, serve HTTP while renewing it, and stop cleanly.
//!
//! The order is deliberate: the schema is checked (and migrated) first, the listener is bound
//! before the lease is taken (so `/healthz` answers while a `--handover wait` process waits, and a
//! port conflict is found without touching the lease), the tenure is opened under the new fencing
//! token, and only then is the process ready. On a graceful stop it drains HTTP, closes its
//! tenure and releases the lease; on a lost lease it drains and exits with code 4. Each of the
//! drain and the closing after it has a deadline, and what misses it is abandoned.
//!
//! [`serve`] is those phases in order: `open`, `take_lease`, `run` and `drain`. Every
//! task beside HTTP is a `Background`, stopped by one cancel, wait, warn and cut off sequence.

use std::future::Future;
use std::sync::Arc;

use fermata_accounts::Accounts;
use fermata_collab::{
    DocumentFences, Documents, Media, RoomManager, SWEEP_EVERY, Sweeps, WriterFence,
};
use fermata_http::{HttpState, Phase, Readiness};
use fermata_metrics::Metrics;
use fermata_store::{ErrorChain, Storage, TenureStart};
use fermata_store_sql::SqlStorage;
use tokio::task::{JoinError, JoinHandle};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::ServeSettings;
use crate::failure::{Exit, Failure};
use crate::schema_runtime::SchemaRuntime;
use crate::writer_lease::{self, Granted, Keeper, KeeperExit, LeaseTimings, TakeError};
use crate::{keys, storage};

/// The release, as recorded in tenures and metrics.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Serves until `shutdown` is cancelled or the writer lease is lost: the four phases in order.
pub async fn serve(settings: ServeSettings, shutdown: CancellationToken) -> Result<(), Failure> {
    let mut server = open(&settings).await?;
    if let Some(cluster) = &settings.cluster {
        return crate::cluster::serve_member(server, &settings, cluster, shutdown).await;
    }
    let Some(granted) = take_lease(&mut server, &settings, &shutdown).await? else {
        return Ok(());
    };
    let running = run(&server, &settings, granted, &shutdown).await;
    drain(server, running, settings.lease).await
}

/// What the serving process holds from opening to the end of its drain.
pub(crate) struct Server {
    pub(crate) store: SqlStorage,
    /// The name this process takes the lease and claims workflow runs under.
    pub(crate) holder: String,
    /// This start's instance ID, in `holder` and a cluster member's lease name.
    pub(crate) instance: String,
    /// The address HTTP is bound to.
    pub(crate) local: std::net::SocketAddr,
    /// The same database as `store`, as the port every service takes.
    pub(crate) shared: Arc<dyn Storage>,
    pub(crate) schema: SchemaRuntime,
    pub(crate) accounts: Arc<Accounts>,
    pub(crate) metrics: Arc<Metrics>,
    /// What `/readyz` reports: waiting for the lease, serving, draining.
    pub(crate) readiness: Readiness,
    /// The fencing token every collaboration write presents; set only while the lease is held.
    pub(crate) fence: WriterFence,
    pub(crate) rooms: RoomManager,
    /// HTTP, started before the lease is taken so `/healthz` answers while it waits.
    pub(crate) http: Background<std::io::Result<()>>,
}

/// The first phase: checks (and migrates) the schema, opens the services, binds the listener
/// and starts HTTP, all before the lease is taken.
async fn open(settings: &ServeSettings) -> Result<Server, Failure> {
    // Every write this process makes goes through its writer fence, which stays empty until it
    // holds the writer lease.
    let (fence, store) = storage::open_fenced(
        &settings.storage,
        settings.lease.database_wait(),
        settings.migrate,
    )
    .await?;
    let keyring = Arc::new(keys::handle(&settings.keys)?);
    let metrics = Arc::new(Metrics::new(VERSION));
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

    let listener = fermata_http::listen(settings.listen).map_err(|error| {
        Failure::runtime(format!("cannot listen on {}: {error}", settings.listen))
    })?;
    let local = listener
        .local_addr()
        .map_err(|error| Failure::runtime(error.to_string()))?;
    let readiness = Readiness::default();
    // A refused client asks again after about as long as a planned hand-over takes: the holder's
    // drain, then the standby's next look at the lease.
    readiness.set_retry_after(settings.lease.drain_timeout + settings.lease.retry_delay());
    let fences = match &settings.cluster {
        None => DocumentFences::whole(fence.clone()),
        Some(_) => {
            let count =
                store.cluster().shard_count().await.map_err(|error| {
                    Failure::store("cannot read the database's shard count", error)
                })?;
            DocumentFences::sharded(Arc::clone(&shared), count)
        }
    };
    let rooms = RoomManager::new(
        Arc::clone(&shared),
        fences,
        settings.collab,
        Arc::clone(&metrics),
    );
    let documents = Documents::new(Arc::clone(&shared), fence.clone(), rooms.clone());
    let media = Media::new(Arc::clone(&shared), fence.clone(), settings.media);
    let state = HttpState {
        readiness: readiness.clone(),
        metrics: Arc::clone(&metrics),
        accounts: Arc::clone(&accounts),
        documents,
        media,
        schema: schema.operations.clone(),
        reviews: schema.reviews.clone(),
        registry: schema.registry.clone(),
        drift: schema.drift.clone(),
        schema_setup: fermata_http::SchemaSetup {
            source: settings.schema.source.is_some(),
            package: settings.schema.package.is_some() || settings.schema.github.is_some(),
            schedule: settings.schema.schedule,
        },
        secure_cookies: settings.secure_cookies,
        edge: settings.http.edge(local),
    };
    let router = fermata_http::router(state);
    let limits = settings.http.limits.clone();
    let http_metrics = Arc::clone(&metrics);
    let http = Background::spawn(
        "requests still in flight after the drain timeout were cut off",
        move |stop| {
            fermata_http::serve(
                listener,
                router,
                limits,
                http_metrics,
                stop.cancelled_owned(),
            )
        },
    );
    tracing::info!(listen = %local, storage = store.driver(), "listening");
    let instance = writer_lease::new_instance();
    Ok(Server {
        store,
        holder: writer_lease::holder_name(&instance),
        instance,
        local,
        shared,
        schema,
        accounts,
        metrics,
        readiness,
        fence,
        rooms,
        http,
    })
}

/// The second phase: takes the writer lease (waiting for it with `--handover wait`), opens this
/// process's tenure under its fencing token, runs the startup sequence and only then is ready.
/// `None` when `shutdown` came first. On any way out without the lease, HTTP is stopped.
async fn take_lease(
    server: &mut Server,
    settings: &ServeSettings,
    shutdown: &CancellationToken,
) -> Result<Option<Granted>, Failure> {
    server.readiness.set(Phase::WaitingForLease);
    let taken = writer_lease::take(
        server.store.leases(),
        &server.holder,
        &settings.lease,
        settings.handover,
        shutdown,
    )
    .await;
    let granted = match taken {
        Ok(Some(granted)) => granted,
        Ok(None) => {
            let _ = server.http.stop().await;
            return Ok(None);
        }
        Err(error) => {
            let _ = server.http.stop().await;
            let exit = match error {
                TakeError::Held(_) => Exit::LeaseHeld,
                TakeError::Store(_) => Exit::Runtime,
            };
            return Err(Failure::new(error.to_string(), exit).with_source(error));
        }
    };
    let lease = &granted.lease;
    server
        .metrics
        .lease_granted(lease.token.0, lease.expires_at.0);
    let start = TenureStart {
        holder: server.holder.clone(),
        version: VERSION.to_owned(),
    };
    if let Err(error) = server.store.tenures().open(&lease.fence(), &start).await {
        let _ = server.store.leases().release(lease).await;
        let _ = server.http.stop().await;
        return Err(Failure::store("cannot record this process's tenure", error));
    }
    // A start that cannot reset does not serve: the fence stays empty, no room has opened (every
    // route but health, readiness and metrics is refused until `Serving`), and the lease goes back.
    if let Err(failure) = fermata_collab::startup::run(&server.store, &lease.fence()).await {
        tracing::error!(error = %ErrorChain(&failure), "the startup reset failed; not serving");
        if let Err(error) = server.store.leases().release(lease).await {
            tracing::warn!(error = %ErrorChain(&error), "could not release the writer lease; it expires by itself");
        }
        server.metrics.lease_dropped();
        let _ = server.http.stop().await;
        return Err(Failure::runtime(format!("{failure}; not serving")).with_source(failure));
    }
    check_for_an_administrator(&server.accounts).await;
    server.fence.set(Some(lease.fence()));
    server.readiness.set(Phase::Serving);
    tracing::info!(
        holder = %server.holder,
        token = %lease.token,
        expires_at = %lease.expires_at,
        "took the writer lease; serving"
    );
    Ok(Some(granted))
}

/// The background tasks that run under the lease, and why serving stopped.
struct Running {
    worker: Background<()>,
    sweeper: Background<()>,
    keeper: Background<KeeperExit>,
    /// The keeper's exit when the lease was lost; `None` when `shutdown` stopped serving.
    lost: Option<Result<KeeperExit, JoinError>>,
}

/// The third phase: runs workflow runs, sweeps and the lease keeper beside HTTP until `shutdown`
/// is cancelled or the keeper reports the lease lost.
async fn run(
    server: &Server,
    settings: &ServeSettings,
    granted: Granted,
    shutdown: &CancellationToken,
) -> Running {
    // Workflow runs (schema operations) execute in the serving process, under the writer lease;
    // the command line executes runs only while no server serves, so step folders left in the
    // data folder now are an earlier process's.
    server.schema.sweep_scratch().await;
    let work = server.work();
    let worker = spawn_worker(&work);
    let sweeper = spawn_sweeper(&work, server.fence.clone());

    let keeper = Keeper {
        renewal: server.store.leases().renewal_channel(),
        lease: granted.lease,
        last_success_sent: granted.sent,
        timings: settings.lease,
        metrics: Arc::clone(&server.metrics),
    };
    let mut keeper = Background::spawn("the writer lease keeper was cut off", |stop| {
        keeper.run(stop)
    });

    let lost = tokio::select! {
        () = shutdown.cancelled() => None,
        exit = &mut keeper.handle => Some(exit),
    };
    Running {
        worker,
        sweeper,
        keeper,
        lost,
    }
}

/// The last phase: stops taking work, lets what is in flight (rooms, sweeps, workflow runs and
/// requests, all at once) finish within the drain timeout, abandoning what has not, then closes
/// the tenure and releases the lease within one database wait, or, when the lease was lost,
/// reports it. So a stop takes at most `drain_timeout` plus one
/// [`database_wait`](LeaseTimings::database_wait), and on a database that answers hardly more
/// than `drain_timeout`.
async fn drain(server: Server, running: Running, timings: LeaseTimings) -> Result<(), Failure> {
    let Running {
        worker,
        sweeper,
        keeper,
        lost,
    } = running;
    server.readiness.set(Phase::Draining);
    if lost.is_some() {
        // Nothing more may be written under a lease that is gone.
        server.fence.set(None);
    }
    // Every part drains at once, under one deadline, so the whole drain takes at most
    // `drain_timeout`, which the lease arithmetic counts on. Rooms checkpoint (while the fence
    // still holds) and close their clients with a retry-later reason, which also ends the
    // WebSockets HTTP waits for; a sweep in flight may be waiting on a database that no longer
    // answers (a lost lease), and is cut off, its transaction rolled back; a run in flight gives
    // its claim back, and another process resumes it from its journal. A room still busy at the
    // deadline is abandoned as the other parts are, so nothing of the drain goes on holding the
    // database's locks while the tenure is closed and the lease released.
    let deadline = Instant::now() + timings.drain_timeout;
    let room_manager = &server.rooms;
    let rooms = async {
        let closing = room_manager.shutdown("the server is stopping; reconnect shortly");
        if tokio::time::timeout_at(deadline, closing).await.is_err() {
            tracing::warn!("rooms still closing after the drain timeout were abandoned");
            room_manager.abandon();
            return;
        }
        // What history the rooms left is written under the fence, in the time that remains.
        let recording = room_manager.recordings_written();
        if tokio::time::timeout_at(deadline, recording).await.is_err() {
            tracing::warn!(
                "history sessions still being written after the drain timeout were dropped"
            );
        }
    };
    tokio::join!(
        rooms,
        sweeper.drain_until(deadline),
        worker.drain_until(deadline),
        server.http.drain_until(deadline),
    );
    // What was in flight finished under the fence or was abandoned; nothing writes after this.
    server.fence.set(None);

    finish(
        server.store,
        &server.metrics,
        "writer lease",
        keeper,
        lost,
        timings,
    )
    .await
}

/// Ends a stop once nothing writes any more: stops the keeper of this process's lease (`name`,
/// "writer lease" or "member lease"), closes the tenure and releases the lease, each within one
/// database wait; or, when the lease was `lost`, reports it as the process's failure.
pub(crate) async fn finish(
    store: SqlStorage,
    metrics: &Metrics,
    name: &'static str,
    mut keeper: Background<KeeperExit>,
    lost: Option<Result<KeeperExit, JoinError>>,
    timings: LeaseTimings,
) -> Result<(), Failure> {
    // Closing is bounded too: a database that does not answer within one wait will not answer
    // in time to matter, and the lease then expires by itself.
    let closing = Instant::now() + timings.database_wait();
    let exit = match lost {
        Some(exit) => exit,
        None => match tokio::time::timeout_at(closing, keeper.stop()).await {
            Ok(exit) => exit,
            Err(_) => {
                tracing::warn!(
                    "the {name} keeper did not stop in time; the lease expires by itself"
                );
                metrics.lease_dropped();
                return Ok(());
            }
        },
    };
    match exit {
        Ok(KeeperExit::Stopped(lease)) => {
            let release = async {
                if let Err(error) = store.tenures().close(&lease.fence()).await {
                    tracing::warn!(error = %ErrorChain(&error), "could not record the end of this tenure");
                }
                match store.leases().release(&lease).await {
                    Ok(_) => {
                        tracing::info!(token = %lease.token, "released the {name}; stopped");
                    }
                    Err(error) => {
                        tracing::warn!(error = %ErrorChain(&error), "could not release the {name}; it expires by itself");
                    }
                }
            };
            if tokio::time::timeout_at(closing, release).await.is_err() {
                tracing::warn!(
                    "closing the tenure and releasing the {name} took longer than the database \
                     wait; the lease expires by itself"
                );
            }
            metrics.lease_dropped();
            // Closing the pool waits for connections still lent out; one an abandoned task held
            // goes with the process instead.
            let _ = tokio::time::timeout_at(closing, store.close()).await;
            Ok(())
        }
        Ok(KeeperExit::Lost(loss)) => {
            tracing::error!(
                reason = loss.reason,
                last_renewed = %humantime::format_rfc3339_millis(loss.last_renewed),
                last_error = loss.last_error.as_deref().unwrap_or("none"),
                "lost the {name}; stopped serving"
            );
            Err(Failure::new(
                format!("lost the {name}: {loss}"),
                Exit::LeaseLost,
            ))
        }
        Err(join) => Err(Failure::runtime(format!(
            "the {name} keeper failed: {join}"
        ))),
    }
}

/// What the singleton work needs of the server: workflow runs and sweeps.
#[derive(Clone)]
pub(crate) struct Work {
    schema: SchemaRuntime,
    holder: String,
    metrics: Arc<Metrics>,
    shared: Arc<dyn Storage>,
}

impl Server {
    pub(crate) fn work(&self) -> Work {
        Work {
            schema: self.schema.clone(),
            holder: self.holder.clone(),
            metrics: Arc::clone(&self.metrics),
            shared: Arc::clone(&self.shared),
        }
    }
}

/// Runs workflow runs (schema operations) in this process until it drains.
pub(crate) fn spawn_worker(work: &Work) -> Background<()> {
    let Work {
        schema,
        holder,
        metrics,
        ..
    } = work.clone();
    Background::spawn(
        "a workflow run still in flight after the drain timeout was cut off",
        |stop| async move { schema.work(holder, metrics, stop).await },
    )
}

/// Sweeps rows nobody needs any more (unsent Chat files, expired Planner credentials, idle MCP
/// sessions) now and then periodically, under `fence`, until this process drains.
pub(crate) fn spawn_sweeper(work: &Work, fence: WriterFence) -> Background<()> {
    let sweeps = Sweeps::new(Arc::clone(&work.shared), fence);
    let every = crate::fault::sweep_every().unwrap_or(SWEEP_EVERY);
    Background::spawn(
        "a sweep still in flight after the drain timeout was cut off",
        |stop| async move { sweeps.run(every, stop.cancelled_owned()).await },
    )
}

/// A task the serving process runs until it drains, and the token that stops it: the one
/// cancel, wait, warn and cut off sequence of every task.
pub(crate) struct Background<T> {
    stop: CancellationToken,
    pub(crate) handle: JoinHandle<T>,
    /// The warning when the task is still running after the drain timeout.
    cut_off: &'static str,
}

impl<T: Send + 'static> Background<T> {
    pub(crate) fn spawn<F>(cut_off: &'static str, task: impl FnOnce(CancellationToken) -> F) -> Self
    where
        F: Future<Output = T> + Send + 'static,
    {
        let stop = CancellationToken::new();
        let handle = tokio::spawn(task(stop.clone()));
        Background {
            stop,
            handle,
            cut_off,
        }
    }

    /// Stops the task and waits for it to end, however long that takes.
    pub(crate) async fn stop(&mut self) -> Result<T, JoinError> {
        self.stop.cancel();
        (&mut self.handle).await
    }

    /// Stops the task and waits for it to end until `deadline`; one still running then is cut
    /// off with a warning.
    pub(crate) async fn drain_until(mut self, deadline: Instant) {
        self.stop.cancel();
        if tokio::time::timeout_at(deadline, &mut self.handle)
            .await
            .is_err()
        {
            tracing::warn!("{}", self.cut_off);
            self.handle.abort();
        }
    }
}

/// Tells the operator how to create the first administrator when there is none.
pub(crate) async fn check_for_an_administrator(accounts: &Accounts) {
    match accounts.has_system_admin().await {
        Ok(true) => {}
        Ok(false) => tracing::warn!(
            "no administrator yet: create one with `fermata user add NAME --role system_admin` \
             (add --password-stdin to choose the password; otherwise one is generated and shown once)"
        ),
        Err(error) => {
            tracing::warn!(error = %ErrorChain(&error), "could not check for an administrator")
        }
    }
}
