//! Stored programs rendered from the model: routines, triggers and events, each without its
//! definer (whoever applies the file becomes it; the model keeps the definer) and with its body
//! exactly as the server keeps it.
//!
//! A trigger's place among the triggers of its table for the same timing and event is not in
//! `SHOW CREATE TRIGGER`; the file names it with `FOLLOWS` or `PRECEDES` ([`trigger_order`]), so
//! that applying the trigger files in path order rebuilds the same order.

use std::collections::BTreeMap;

use super::{identifier, literal};
use crate::names;
use crate::snapshot::model::{Event, Routine, RoutineKind, Trigger};

/// The canonical `CREATE PROCEDURE` or `CREATE FUNCTION` of `routine`, without a trailing
/// newline, in the layout of `SHOW CREATE`: the head, one line per characteristic that is not the
/// default, then the body.
pub fn render_routine(routine: &Routine) -> String {
    let mut text = format!(
        "CREATE {} {}({})",
        routine.kind.keyword(),
        identifier(&routine.name),
        routine.parameter_list
    );
    if let (RoutineKind::Function, Some(returns)) = (routine.kind, &routine.returns) {
        text.push_str(&format!(" RETURNS {returns}"));
    }
    text.push('\n');
    if routine.data_access != "CONTAINS SQL" {
        text.push_str(&format!("    {}\n", routine.data_access));
    }
    if routine.deterministic {
        text.push_str("    DETERMINISTIC\n");
    }
    if routine.security == "INVOKER" {
        text.push_str("    SQL SECURITY INVOKER\n");
    }
    if !routine.comment.is_empty() {
        text.push_str(&format!("    COMMENT {}\n", literal(&routine.comment)));
    }
    text.push_str(&routine.body);
    text
}

/// The canonical `CREATE TRIGGER` of `trigger`, without a trailing newline; `order` is the
/// `FOLLOWS x` or `PRECEDES x` clause of its file, none for the text compared with the server's.
pub fn render_trigger(trigger: &Trigger, order: Option<&str>) -> String {
    let order = order.map(|clause| format!("{clause} ")).unwrap_or_default();
    format!(
        "CREATE TRIGGER {} {} {} ON {} FOR EACH ROW {order}{}",
        identifier(&trigger.name),
        trigger.timing,
        trigger.event,
        identifier(&trigger.table),
        trigger.body
    )
}

/// The order clause of each trigger's file, by trigger name. The files are applied in the order
/// of their paths (the encoded names); a trigger then `FOLLOWS` the trigger already applied that
/// comes last before it in the action order, or else `PRECEDES` the first one already applied
/// after it, or has no clause when it is the first of its table, timing and event to be applied.
pub fn trigger_order(triggers: &[Trigger]) -> BTreeMap<String, String> {
    let mut groups: BTreeMap<(&str, &str, &str), Vec<&Trigger>> = BTreeMap::new();
    for trigger in triggers {
        groups
            .entry((&trigger.table, &trigger.timing, &trigger.event))
            .or_default()
            .push(trigger);
    }
    let mut clauses = BTreeMap::new();
    for group in groups.values() {
        for trigger in group {
            let key = names::encode(&trigger.name);
            let applied = group
                .iter()
                .filter(|other| names::encode(&other.name) < key);
            let before = applied
                .clone()
                .filter(|other| other.action_order < trigger.action_order)
                .max_by_key(|other| other.action_order);
            let after = applied
                .filter(|other| other.action_order > trigger.action_order)
                .min_by_key(|other| other.action_order);
            let clause = match (before, after) {
                (Some(before), _) => format!("FOLLOWS {}", identifier(&before.name)),
                (None, Some(after)) => format!("PRECEDES {}", identifier(&after.name)),
                (None, None) => continue,
            };
            clauses.insert(trigger.name.clone(), clause);
        }
    }
    clauses
}

/// The canonical `CREATE EVENT` of `event`, without a trailing newline. Its times are in the
/// event's own time zone (`schema.json` keeps it), as `SHOW CREATE EVENT` prints them.
pub fn render_event(event: &Event) -> String {
    let mut schedule = match (&event.execute_at, &event.interval) {
        (Some(at), _) => format!("AT '{at}'"),
        (None, Some(interval)) => format!("EVERY {} {}", interval.value, interval.field),
        (None, None) => String::new(),
    };
    if let Some(starts) = &event.starts {
        schedule.push_str(&format!(" STARTS '{starts}'"));
    }
    if let Some(ends) = &event.ends {
        schedule.push_str(&format!(" ENDS '{ends}'"));
    }
    let comment = if event.comment.is_empty() {
        String::new()
    } else {
        format!(" COMMENT {}", literal(&event.comment))
    };
    format!(
        "CREATE EVENT {} ON SCHEDULE {schedule} ON COMPLETION {} {}{comment} DO {}",
        identifier(&event.name),
        event.on_completion,
        event.status,
        event.body
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trigger(name: &str, action_order: u32) -> Trigger {
        Trigger {
            name: name.to_owned(),
            table: "t".to_owned(),
            timing: "BEFORE".to_owned(),
            event: "INSERT".to_owned(),
            action_order,
            body: "SET @x = 1".to_owned(),
            definer: "a@b".to_owned(),
            sql_mode: String::new(),
        }
    }

    /// Applies the triggers in path order with their clauses and returns the resulting order.
    fn applied(triggers: &[Trigger]) -> Vec<String> {
        let clauses = trigger_order(triggers);
        let mut sorted: Vec<&Trigger> = triggers.iter().collect();
        sorted.sort_by_key(|t| names::encode(&t.name));
        let mut order: Vec<String> = Vec::new();
        for trigger in sorted {
            let name = trigger.name.clone();
            match clauses.get(&name).map(String::as_str) {
                None => order.push(name),
                Some(clause) => {
                    let (word, other) = clause.split_once(' ').unwrap();
                    let other = other.trim_matches('`');
                    let at = order.iter().position(|n| n == other).unwrap();
                    order.insert(if word == "FOLLOWS" { at + 1 } else { at }, name);
                }
            }
        }
        order
    }

    #[test]
    fn applying_the_files_in_path_order_rebuilds_the_action_order() {
        for orders in [
            [1, 2, 3],
            [3, 2, 1],
            [2, 3, 1],
            [1, 3, 2],
            [3, 1, 2],
            [2, 1, 3],
        ] {
            let triggers: Vec<Trigger> = ["Zeta", "alpha", "beta"]
                .iter()
                .zip(orders)
                .map(|(name, order)| trigger(name, order))
                .collect();
            let mut expected = triggers.clone();
            expected.sort_by_key(|t| t.action_order);
            let expected: Vec<String> = expected.into_iter().map(|t| t.name).collect();
            assert_eq!(applied(&triggers), expected, "{orders:?}");
        }
    }
}
