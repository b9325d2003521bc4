//! The `definer-not-allowed` rule: a view, routine, trigger or event whose definer matches none
//! of the allowed `user@host` patterns.
//!
//! A definer and a pattern are split at their last `@`. The user part matches as written, the
//! host part whatever its case (host names are not case-sensitive); both take MySQL's `%` (any
//! run of characters) and `_` (one character), which `\` makes themselves.

use super::{Found, Object};
use crate::wildcard::Syntax;

use crate::snapshot::model::DatabaseModel;

/// `user@host` split at the last `@`; a text without one is a user with an empty host.
fn split(account: &str) -> (&str, &str) {
    account.rsplit_once('@').unwrap_or((account, ""))
}

/// Whether `definer` matches `pattern`.
fn allowed_by(pattern: &str, definer: &str) -> bool {
    let (pattern_user, pattern_host) = split(pattern);
    let (user, host) = split(definer);
    Syntax::Grant.matches(pattern_user, user)
        && Syntax::Grant.matches(&pattern_host.to_lowercase(), &host.to_lowercase())
}

/// Each view, routine, trigger and event whose definer matches none of `allowed`; nothing when
/// `allowed` is empty.
pub(super) fn definer_not_allowed(model: &DatabaseModel, allowed: &[String]) -> Vec<Found> {
    if allowed.is_empty() {
        return Vec::new();
    }
    let programs = model
        .views
        .iter()
        .map(|view| (Object::View(view.name.clone()), "view", &view.definer))
        .chain(model.routines.iter().map(|routine| {
            (
                Object::Routine(routine.kind, routine.name.clone()),
                routine.kind.keyword(),
                &routine.definer,
            )
        }))
        .chain(model.triggers.iter().map(|trigger| {
            (
                Object::Trigger(trigger.name.clone()),
                "trigger",
                &trigger.definer,
            )
        }))
        .chain(
            model
                .events
                .iter()
                .map(|event| (Object::Event(event.name.clone()), "event", &event.definer)),
        );
    programs
        .filter(|(_, _, definer)| !allowed.iter().any(|pattern| allowed_by(pattern, definer)))
        .map(|(object, kind, definer)| Found {
            object,
            message: format!(
                "The definer {definer} matches none of the allowed definers: create the {} \
                 again with DEFINER set to an allowed account.",
                kind.to_lowercase()
            ),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::Rule;
    use super::super::fixtures::{found, model};
    use super::*;
    use crate::snapshot::model::{Event, RoutineKind, Trigger, View};
    use crate::test_models::routine;

    #[test]
    fn definers_match_patterns_with_wildcards_on_both_parts() {
        for (pattern, definer, allowed) in [
            ("root@localhost", "root@localhost", true),
            ("root@localhost", "root@LocalHost", true),
            ("root@localhost", "Root@localhost", false),
            ("app@%", "app@%", true),
            ("app@%", "app@10.0.0.7", true),
            ("app@%", "app2@10.0.0.7", false),
            ("app@10.0.0.%", "app@10.0.0.7", true),
            ("app@10.0.0.%", "app@10.0.1.7", false),
            ("app_@%", "app1@h", true),
            ("app\\_@%", "app1@h", false),
            ("app\\_@%", "app_@h", true),
            ("%@localhost", "anyone@localhost", true),
            ("%@localhost", "anyone@db", false),
            // Split at the last `@`: a user may hold one.
            ("a@b@%", "a@b@h", true),
            ("a@%", "a@b@h", false),
            ("app@%.EXAMPLE.com", "app@db.example.COM", true),
        ] {
            assert_eq!(allowed_by(pattern, definer), allowed, "{pattern} {definer}");
        }
    }

    fn programs() -> crate::snapshot::model::DatabaseModel {
        let mut shop = model(vec![]);
        shop.views.push(View {
            name: "v".to_owned(),
            definition: "select 1 AS `1`".to_owned(),
            algorithm: "UNDEFINED".to_owned(),
            security: "DEFINER".to_owned(),
            check_option: "NONE".to_owned(),
            definer: "root@localhost".to_owned(),
        });
        for (name, kind, definer) in [
            ("f", RoutineKind::Function, "app@%"),
            ("p", RoutineKind::Procedure, "dba@10.0.0.1"),
        ] {
            shop.routines.push(routine(name, kind, definer));
        }
        shop.triggers.push(Trigger {
            name: "t".to_owned(),
            table: "orders".to_owned(),
            timing: "BEFORE".to_owned(),
            event: "INSERT".to_owned(),
            action_order: 1,
            body: "SET NEW.a = 1".to_owned(),
            definer: "app@%".to_owned(),
            sql_mode: String::new(),
        });
        shop.events.push(Event {
            name: "e".to_owned(),
            execute_at: None,
            interval: None,
            starts: None,
            ends: None,
            on_completion: "NOT PRESERVE".to_owned(),
            status: "ENABLE".to_owned(),
            comment: String::new(),
            body: "DO 1".to_owned(),
            definer: "cron@localhost".to_owned(),
            time_zone: "SYSTEM".to_owned(),
            sql_mode: String::new(),
        });
        shop
    }

    #[test]
    fn programs_whose_definer_is_not_allowed_are_found() {
        let shop = programs();
        let findings = found(&shop, Rule::DefinerNotAllowed, &["app@%", "root@localhost"]);
        assert_eq!(
            findings,
            [
                (
                    "procedure `p`".to_owned(),
                    "The definer dba@10.0.0.1 matches none of the allowed definers: create the \
                     procedure again with DEFINER set to an allowed account."
                        .to_owned()
                ),
                (
                    "event `e`".to_owned(),
                    "The definer cron@localhost matches none of the allowed definers: create \
                     the event again with DEFINER set to an allowed account."
                        .to_owned()
                ),
            ]
        );
        let everyone = found(&shop, Rule::DefinerNotAllowed, &["%@%"]);
        assert!(everyone.is_empty());
        let only_app = found(&shop, Rule::DefinerNotAllowed, &["app@%"]);
        let objects: Vec<&str> = only_app.iter().map(|(object, _)| object.as_str()).collect();
        assert_eq!(objects, ["view `v`", "procedure `p`", "event `e`"]);
        // No allowed definers: the rule finds nothing.
        assert!(found(&shop, Rule::DefinerNotAllowed, &[]).is_empty());
    }
}
