//! The other objects' part of a migration: sequences, views, routines, triggers and events.
//!
//! Views are replaced with `CREATE OR REPLACE` on both servers, each after the views it reads.
//! MariaDB replaces routines and events the same way; MySQL cannot, so a changed one is dropped
//! and created again. Triggers are kept per table, timing and event: when anything in such a
//! group changes, the group's triggers are dropped and created again in their action order (a
//! trigger created without `FOLLOWS` or `PRECEDES` goes last), which both servers accept and
//! which rebuilds the order exactly. Every stored program runs under the `sql_mode` it was
//! created with, and an event under its time zone; views run under the introspection ones, in
//! whose spelling the model keeps them. Every created view and stored program names its definer,
//! as the model has it, so the script leaves the object as the target says.
//!
//! A sequence's current value is data: a sequence dropped, or replaced because its engine or
//! comment changes, is destructive; its other settings change with `ALTER SEQUENCE`, which keeps
//! the value, unless the range narrows: the server refuses a current value outside it, so the
//! sequence restarts (`RESTART`), which is destructive too.

use std::collections::{BTreeMap, BTreeSet};

use super::{Statement, definer_clause};
use crate::snapshot::model::{DatabaseModel, Event, Flavor, Routine, Sequence, Trigger, View};
use crate::snapshot::render::{
    identifier, render_event, render_routine, render_sequence, render_trigger, render_view,
};
use crate::snapshot::{SQL_MODE, TIME_ZONE, set_session};

/// The statements of a plan for the objects other than tables, by phase.
#[derive(Default)]
pub(super) struct ProgramPlan {
    /// Views, routines, triggers and events that go or are replaced by drop and create; before
    /// the tables change.
    pub(super) drops: Vec<Statement>,
    /// Sequences created or altered, before the tables (a default may read one).
    pub(super) sequences: Vec<Statement>,
    /// Sequences dropped, after the tables.
    pub(super) sequence_drops: Vec<Statement>,
    /// Routines, views, triggers and events created or replaced, once the tables are done.
    pub(super) creates: Vec<Statement>,
}

pub(super) fn plan(from: &DatabaseModel, to: &DatabaseModel, flavor: Flavor) -> ProgramPlan {
    let mut plan = ProgramPlan::default();
    sequences(&from.sequences, &to.sequences, &mut plan);
    routines(&from.routines, &to.routines, flavor, &mut plan);
    views(&from.views, &to.views, &mut plan);
    let remaining: BTreeSet<&str> = to.tables.iter().map(|t| t.name.as_str()).collect();
    triggers(&from.triggers, &to.triggers, &remaining, &mut plan);
    events(&from.events, &to.events, flavor, &mut plan);
    plan
}

/// The objects of `to` that are new or differ from `from`'s of the same key, and the keys of
/// `from`'s that `to` lacks.
fn changes<'a, T: PartialEq, K: Ord>(
    from: &'a [T],
    to: &'a [T],
    key: impl Fn(&T) -> K,
) -> (Vec<&'a T>, Vec<&'a T>) {
    let old: BTreeMap<K, &T> = from.iter().map(|item| (key(item), item)).collect();
    let new: BTreeMap<K, &T> = to.iter().map(|item| (key(item), item)).collect();
    let changed = to
        .iter()
        .filter(|item| old.get(&key(item)) != Some(item))
        .collect();
    let gone = from
        .iter()
        .filter(|item| !new.contains_key(&key(item)))
        .collect();
    (changed, gone)
}

/// `rendered` (a `CREATE ...` without a definer) as `CREATE [OR REPLACE] DEFINER=... ...`.
fn created(rendered: &str, definer: &str, replace: bool) -> Statement {
    let clause = definer_clause(definer);
    let rest = rendered.strip_prefix("CREATE ").unwrap_or(rendered);
    let head = if replace {
        "CREATE OR REPLACE"
    } else {
        "CREATE"
    };
    Statement {
        compound: true,
        definer_clause: Some(clause.clone()),
        ..Statement::new(format!("{head} {clause} {rest}"))
    }
}

fn sequences(from: &[Sequence], to: &[Sequence], plan: &mut ProgramPlan) {
    let (changed, gone) = changes(from, to, |s| s.name.clone());
    let old: BTreeMap<&str, &Sequence> = from.iter().map(|s| (s.name.as_str(), s)).collect();
    for sequence in changed {
        let name = identifier(&sequence.name);
        match old.get(sequence.name.as_str()) {
            None => plan
                .sequences
                .push(Statement::new(render_sequence(sequence))),
            Some(before)
                if before.engine == sequence.engine && before.comment == sequence.comment =>
            {
                let altered = format!(
                    "ALTER SEQUENCE {name} INCREMENT BY {} MINVALUE {} MAXVALUE {} START WITH {} {} {}",
                    sequence.increment,
                    sequence.minimum,
                    sequence.maximum,
                    sequence.start,
                    if sequence.cache == "0" {
                        "NOCACHE".to_owned()
                    } else {
                        format!("CACHE {}", sequence.cache)
                    },
                    if sequence.cycle { "CYCLE" } else { "NOCYCLE" },
                );
                plan.sequences.push(if narrows(before, sequence) {
                    Statement::destructive(
                        format!("{altered} RESTART"),
                        format!(
                            "narrows the range of sequence {name}, which starts again (its current value may lie outside)"
                        ),
                    )
                } else {
                    Statement::new(altered)
                });
            }
            Some(_) => plan.sequences.push(Statement::destructive(
                render_sequence(sequence).replacen(
                    "CREATE SEQUENCE",
                    "CREATE OR REPLACE SEQUENCE",
                    1,
                ),
                format!("replaces sequence {name}, which starts again"),
            )),
        }
    }
    for sequence in gone {
        let name = identifier(&sequence.name);
        plan.sequence_drops.push(Statement::destructive(
            format!("DROP SEQUENCE {name}"),
            format!("drops sequence {name} and its current value"),
        ));
    }
}

/// Whether `to`'s range leaves out values of `from`'s: the server refuses the `ALTER SEQUENCE`
/// when the current value falls outside, which only `RESTART` gets past. A bound that does not
/// read as a number counts as narrowing.
fn narrows(from: &Sequence, to: &Sequence) -> bool {
    let bound = |text: &str| text.parse::<i128>().ok();
    match (
        bound(&from.minimum),
        bound(&to.minimum),
        bound(&from.maximum),
        bound(&to.maximum),
    ) {
        (Some(old_min), Some(new_min), Some(old_max), Some(new_max)) => {
            new_min > old_min || new_max < old_max
        }
        _ => true,
    }
}

fn routines(from: &[Routine], to: &[Routine], flavor: Flavor, plan: &mut ProgramPlan) {
    let key = |r: &Routine| (r.kind, r.name.clone());
    let (changed, gone) = changes(from, to, key);
    let old: BTreeSet<_> = from.iter().map(key).collect();
    let drop = |routine: &Routine| {
        Statement::new(format!(
            "DROP {} IF EXISTS {}",
            routine.kind.keyword(),
            identifier(&routine.name)
        ))
    };
    plan.drops.extend(gone.into_iter().map(drop));
    for routine in changed {
        let replace = flavor == Flavor::Mariadb;
        if !replace && old.contains(&key(routine)) {
            plan.drops.push(drop(routine));
        }
        plan.creates
            .push(Statement::new(set_session(&routine.sql_mode, TIME_ZONE)));
        plan.creates
            .push(created(&render_routine(routine), &routine.definer, replace));
    }
}

/// `views` in the order they can be created: each after the others of them it reads, otherwise
/// as they come; where they read each other in a cycle, the first of those left goes first. Which
/// views each reads is found once, so thousands of views cost what their pairs' texts do.
fn reading_order<'a>(views: &[&'a View]) -> Vec<&'a View> {
    let quoted: Vec<String> = views.iter().map(|view| identifier(&view.name)).collect();
    // `readers[j]`: the views that read view `j`; `unread[i]`: how many of those view `i` reads
    // are not created yet.
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); views.len()];
    let mut unread: Vec<usize> = vec![0; views.len()];
    for (i, view) in views.iter().enumerate() {
        for (j, other) in views.iter().enumerate() {
            if other.name != view.name && view.definition.contains(&quoted[j]) {
                readers[j].push(i);
                unread[i] += 1;
            }
        }
    }
    let mut pending: Vec<usize> = (0..views.len()).collect();
    let mut ordered = Vec::with_capacity(views.len());
    while !pending.is_empty() {
        let next = pending.iter().position(|&i| unread[i] == 0).unwrap_or(0);
        let view = pending.remove(next);
        for &reader in &readers[view] {
            unread[reader] = unread[reader].saturating_sub(1);
        }
        ordered.push(views[view]);
    }
    ordered
}

fn views(from: &[View], to: &[View], plan: &mut ProgramPlan) {
    let (changed, gone) = changes(from, to, |v| v.name.clone());
    plan.drops.extend(
        gone.into_iter()
            .map(|view| Statement::new(format!("DROP VIEW IF EXISTS {}", identifier(&view.name)))),
    );
    // A routine created before them left its own `sql_mode`, under which the views' text (in
    // the introspection spelling) may read otherwise: a `\\` in a literal under
    // `NO_BACKSLASH_ESCAPES`.
    if !changed.is_empty() && !plan.creates.is_empty() {
        plan.creates
            .push(Statement::new(set_session(SQL_MODE, TIME_ZONE)));
    }
    for view in reading_order(&changed) {
        let rendered = render_view(view);
        // `CREATE ALGORITHM=x SQL SECURITY y VIEW ...`: the definer goes before `SQL SECURITY`.
        let clause = definer_clause(&view.definer);
        let sql = match rendered.split_once(" SQL SECURITY ") {
            Some((head, tail)) => format!(
                "{} {clause} SQL SECURITY {tail}",
                head.replacen("CREATE ", "CREATE OR REPLACE ", 1)
            ),
            None => rendered.replacen("CREATE ", "CREATE OR REPLACE ", 1),
        };
        plan.creates.push(Statement {
            definer_clause: Some(clause),
            ..Statement::new(sql)
        });
    }
}

fn triggers(
    from: &[Trigger],
    to: &[Trigger],
    remaining_tables: &BTreeSet<&str>,
    plan: &mut ProgramPlan,
) {
    type Group<'a> = BTreeMap<(&'a str, &'a str, &'a str), Vec<&'a Trigger>>;
    fn grouped(triggers: &[Trigger]) -> Group<'_> {
        let mut groups: Group = BTreeMap::new();
        for trigger in triggers {
            groups
                .entry((&trigger.table, &trigger.timing, &trigger.event))
                .or_default()
                .push(trigger);
        }
        for group in groups.values_mut() {
            group.sort_by_key(|t| t.action_order);
        }
        groups
    }
    let (old, new) = (grouped(from), grouped(to));
    let keys: BTreeSet<_> = old.keys().chain(new.keys()).copied().collect();
    for key in keys {
        let (before, after) = (old.get(&key), new.get(&key));
        if before == after {
            continue;
        }
        // A dropped table takes its triggers with it.
        if remaining_tables.contains(key.0) {
            for trigger in before.into_iter().flatten() {
                plan.drops.push(Statement::new(format!(
                    "DROP TRIGGER IF EXISTS {}",
                    identifier(&trigger.name)
                )));
            }
        }
        for trigger in after.into_iter().flatten() {
            plan.creates
                .push(Statement::new(set_session(&trigger.sql_mode, TIME_ZONE)));
            plan.creates.push(created(
                &render_trigger(trigger, None),
                &trigger.definer,
                false,
            ));
        }
    }
}

fn events(from: &[Event], to: &[Event], flavor: Flavor, plan: &mut ProgramPlan) {
    let (changed, gone) = changes(from, to, |e| e.name.clone());
    let old: BTreeSet<&str> = from.iter().map(|e| e.name.as_str()).collect();
    let drop =
        |event: &Event| Statement::new(format!("DROP EVENT IF EXISTS {}", identifier(&event.name)));
    plan.drops.extend(gone.into_iter().map(drop));
    for event in changed {
        let replace = flavor == Flavor::Mariadb;
        if !replace && old.contains(event.name.as_str()) {
            plan.drops.push(drop(event));
        }
        plan.creates.push(Statement::new(set_session(
            &event.sql_mode,
            &event.time_zone,
        )));
        plan.creates
            .push(created(&render_event(event), &event.definer, replace));
    }
}
