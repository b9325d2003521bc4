//! `fermata serve` as a member of a cluster: several processes on one PostgreSQL database, each
//! document written by exactly one of them, the holder of its shard's writer lease.
//!
//! A member joins under a lease of its own (`fermata:member:<instance>`), renewed by the writer
//! lease's keeper with the same timings; every write it makes outside a document's shard (logins,
//! sessions, tokens, tenures) is fenced by that lease, so a member that lost it writes nothing.
//! If no shard lease is live anywhere when it joins and it can take the coordinator's lease, the
//! cluster is starting cold: it runs the startup reset under that lease before it announces
//! itself, and no member takes a shard before a member that announced itself coordinates. Then
//! the shard keeper ([`keeper`]) takes the shards rendezvous hashing
//! (`fermata_store::placement`) gives it, and the coordinator runs the singleton work: workflow
//! runs, the schedule and the sweeps.
//!
//! On a stop it hands every shard over (their rooms close under the still-held fences and their
//! clients reconnect, to be forwarded to the next holder), gives up the coordinator's lease,
//! drains HTTP, and leaves. A member whose own lease is lost stops at once, as a process that
//! serves alone does when it loses the writer lease.

mod keeper;

use std::sync::Arc;

use fermata_collab::WriterFence;
use fermata_http::Phase;
use fermata_store::{
    Acquisition, Announcement, ClusterView, ErrorChain, Fence, Lease, LeaseName, Storage,
    TenureStart,
};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::{ClusterSettings, ServeSettings};
use crate::failure::{Exit, Failure};
use crate::serve::{
    Background, Server, VERSION, Work, check_for_an_administrator, finish, spawn_sweeper,
    spawn_worker,
};
use crate::writer_lease::Keeper;
use keeper::ShardKeeper;

/// Serves as a member of a cluster until `shutdown` or until the member lease is lost.
pub(crate) async fn serve_member(
    mut server: Server,
    settings: &ServeSettings,
    cluster: &ClusterSettings,
    shutdown: CancellationToken,
) -> Result<(), Failure> {
    server.readiness.set(Phase::WaitingForLease);
    let joined = match join(&server, settings, cluster).await {
        Ok(joined) => joined,
        Err(failure) => {
            let _ = server.http.stop().await;
            return Err(failure);
        }
    };
    let member = joined.member.clone();
    let joined_member = member.fence();
    server.fence.set(Some(member.fence()));
    server.readiness.set(Phase::Serving);
    check_for_an_administrator(&server.accounts).await;
    tracing::info!(
        holder = %server.holder,
        advertise = %advertised(&server, cluster),
        coordinator = joined.coordinating.is_some(),
        "joined the cluster; serving"
    );

    let (coordinator, coordinated) = watch::channel(None);
    let count = server
        .store
        .cluster()
        .shard_count()
        .await
        .map_err(|error| Failure::store("cannot read the database's shard count", error))?;
    let keeper = ShardKeeper::new(
        &server,
        count,
        settings.lease,
        coordinator,
        joined.coordinating,
    );
    let shards = Background::spawn(
        "shards still being handed over after the drain timeout expire by themselves",
        |stop| keeper.run(stop),
    );
    let work = server.work();
    let drain_timeout = settings.lease.drain_timeout;
    let singletons = Background::spawn("the singleton work was cut off", |stop| {
        run_singletons(work, coordinated, drain_timeout, stop)
    });
    let renewal = Keeper {
        renewal: server.store.leases().renewal_channel(),
        lease: member,
        last_success_sent: joined.sent,
        timings: settings.lease,
        metrics: Arc::clone(&server.metrics),
    };
    let mut renewal = Background::spawn("the member lease keeper was cut off", |stop| {
        renewal.run(stop)
    });
    let lost = tokio::select! {
        () = shutdown.cancelled() => None,
        exit = &mut renewal.handle => Some(exit),
    };

    server.readiness.set(Phase::Draining);
    if lost.is_none() {
        // Out of the others' placement first, so each of the shards handed over below is
        // taken by its next owner at that member's next look.
        if let Err(error) = server.store.cluster().withdraw(&joined_member).await {
            tracing::warn!(error = %ErrorChain(&error), "could not withdraw from the cluster; the others place this member's shards once its lease is released");
        }
    }
    let timings = settings.lease;
    let deadline = Instant::now() + timings.drain_timeout;
    if lost.is_some() {
        // Nothing more may be written under a membership that is gone.
        server.fence.set(None);
        server.rooms.fences().clear();
    }
    // The shard keeper hands every shard over within the drain timeout; what it leaves (and
    // every room of a lost membership) closes with the rest.
    let http = server.http;
    let rooms = server.rooms.clone();
    let drained_rooms = async {
        shards.drain_until(deadline + timings.retry_delay()).await;
        rooms
            .shutdown("the server is stopping; reconnect shortly")
            .await;
    };
    tokio::join!(
        drained_rooms,
        singletons.drain_until(deadline),
        http.drain_until(deadline),
    );
    server.fence.set(None);
    finish(
        server.store,
        &server.metrics,
        "member lease",
        renewal,
        lost,
        timings,
    )
    .await
}

/// The base URL other members reach this one at.
fn advertised(server: &Server, cluster: &ClusterSettings) -> String {
    cluster
        .advertise
        .clone()
        .unwrap_or_else(|| format!("http://{}", server.local))
}

/// What joining left: the member lease and when it was asked for, and the coordinator's lease
/// when this member took it.
struct Joined {
    member: Lease,
    sent: Instant,
    coordinating: Option<(Lease, Instant)>,
}

/// Takes the member lease, opens the tenure under it, takes the coordinator's lease when the
/// cluster is starting cold and runs the startup reset under it, then announces this member.
async fn join(
    server: &Server,
    settings: &ServeSettings,
    cluster: &ClusterSettings,
) -> Result<Joined, Failure> {
    let leases = server.store.leases();
    let name = LeaseName::member(&server.instance)
        .map_err(|error| Failure::store("cannot name this member's lease", error))?;
    until_no_cold_start_is_under_way(server, settings).await?;
    let sent = Instant::now();
    let member = match leases
        .acquire(&name, &server.holder, settings.lease.ttl)
        .await
    {
        Ok(Acquisition::Granted(lease)) => lease,
        Ok(Acquisition::Held(record)) => {
            return Err(Failure::runtime(format!(
                "another member already joined as {}; start again",
                record.holder
            )));
        }
        Err(error) => return Err(Failure::store("cannot join the cluster", error)),
    };
    let start = TenureStart {
        holder: server.holder.clone(),
        version: VERSION.to_owned(),
    };
    if let Err(error) = server.store.tenures().open(&member.fence(), &start).await {
        let _ = leases.release(&member).await;
        return Err(Failure::store("cannot record this process's tenure", error));
    }
    let coordinating = match cold_start(server, settings).await {
        Ok(coordinating) => coordinating,
        Err(failure) => {
            let _ = leases.release(&member).await;
            return Err(failure);
        }
    };
    let announcement = Announcement {
        address: advertised(server, cluster),
        version: VERSION.to_owned(),
    };
    if let Err(error) = server
        .store
        .cluster()
        .announce(&member.fence(), &announcement)
        .await
    {
        if let Some((lease, _)) = &coordinating {
            let _ = leases.release(lease).await;
        }
        let _ = leases.release(&member).await;
        return Err(Failure::store("cannot announce this member", error));
    }
    Ok(Joined {
        member,
        sent,
        coordinating,
    })
}

/// Waits while another member starts the cluster cold: no shard lease is live and the
/// coordinator's lease is held by a member that has not announced itself. That member announces
/// itself once its startup reset is done, or, when it died first, its lease expires and the next
/// to join starts the cluster instead, reset included; a member that joined meanwhile would take
/// the coordinator's lease over without the reset.
async fn until_no_cold_start_is_under_way(
    server: &Server,
    settings: &ServeSettings,
) -> Result<(), Failure> {
    let mut told = false;
    loop {
        let view = view_of(server).await?;
        let starting = !any_shard_live(&view)
            && view
                .live_holder(&LeaseName::COORDINATOR)
                .is_some_and(|record| {
                    !view
                        .members
                        .iter()
                        .any(|member| member.lease.holder == record.holder)
                });
        if !starting {
            return Ok(());
        }
        if !told {
            tracing::info!("another member is starting the cluster; waiting for it");
            told = true;
        }
        tokio::time::sleep(settings.lease.retry_delay()).await;
    }
}

/// The cluster's view, as `server`'s database gives it.
async fn view_of(server: &Server) -> Result<ClusterView, Failure> {
    server
        .store
        .cluster()
        .view()
        .await
        .map_err(|error| Failure::store("cannot read the cluster", error))
}

/// Whether any shard's writer lease is live in `view`: the cluster is running.
fn any_shard_live(view: &ClusterView) -> bool {
    view.leases
        .iter()
        .any(|record| record.name.shard().is_some() && record.is_live(view.now))
}

/// When no shard lease is live and the coordinator's lease is free, the cluster starts cold:
/// this member takes the coordinator's lease and runs the startup reset under it, before any
/// room opens anywhere. Otherwise the cluster is already running, and nothing is reset.
async fn cold_start(
    server: &Server,
    settings: &ServeSettings,
) -> Result<Option<(Lease, Instant)>, Failure> {
    let view = view_of(server).await?;
    let running = view.live_holder(&LeaseName::COORDINATOR).is_some() || any_shard_live(&view);
    if running {
        return Ok(None);
    }
    let sent = Instant::now();
    let lease = match server
        .store
        .leases()
        .acquire(&LeaseName::COORDINATOR, &server.holder, settings.lease.ttl)
        .await
    {
        Ok(Acquisition::Granted(lease)) => lease,
        Ok(Acquisition::Held(record)) if record.name == LeaseName::WRITER => {
            return Err(Failure::new(
                format!(
                    "a process serving this database alone holds the writer lease ({}); stop it \
                     before starting a cluster",
                    record.holder
                ),
                Exit::LeaseHeld,
            ));
        }
        Ok(Acquisition::Held(_)) => return Ok(None),
        Err(error) => return Err(Failure::store("cannot take the coordinator's lease", error)),
    };
    if let Err(failure) = fermata_collab::startup::run(&server.store, &lease.fence()).await {
        let _ = server.store.leases().release(&lease).await;
        return Err(Failure::runtime(format!("{failure}; not serving")).with_source(failure));
    }
    Ok(Some((lease, sent)))
}

/// Runs the singleton work (workflow runs with the schedule, and the sweeps) while this member
/// holds the coordinator's lease, and stops it when the lease goes.
async fn run_singletons(
    work: Work,
    mut coordinated: watch::Receiver<Option<Fence>>,
    drain_timeout: std::time::Duration,
    stop: CancellationToken,
) {
    let fence = WriterFence::default();
    let mut running: Option<(Background<()>, Background<()>)> = None;
    loop {
        let current = coordinated.borrow_and_update().clone();
        fence.set(current.clone());
        match (&current, running.is_some()) {
            (Some(_), false) => {
                running = Some((spawn_worker(&work), spawn_sweeper(&work, fence.clone())));
            }
            (None, true) => {
                if let Some((worker, sweeper)) = running.take() {
                    let deadline = Instant::now() + drain_timeout;
                    tokio::join!(worker.drain_until(deadline), sweeper.drain_until(deadline));
                }
            }
            _ => {}
        }
        tokio::select! {
            () = stop.cancelled() => break,
            changed = coordinated.changed() => if changed.is_err() { break },
        }
    }
    if let Some((worker, sweeper)) = running {
        let deadline = Instant::now() + drain_timeout;
        tokio::join!(worker.drain_until(deadline), sweeper.drain_until(deadline));
    }
}
