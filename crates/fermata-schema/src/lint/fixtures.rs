//! The findings of one rule under the default settings, for the lint rules' tests; the small
//! models they read are the crate's test models.

pub(super) use crate::test_models::{column, index, model, table};

use super::{Finding, LintSettings, Rule, lint};
use crate::snapshot::model::DatabaseModel;

/// What `rule` finds in `model` under the default settings (and `allowed_definers`), as
/// objects and messages.
pub(super) fn found(
    model: &DatabaseModel,
    rule: Rule,
    allowed_definers: &[&str],
) -> Vec<(String, String)> {
    let settings = LintSettings {
        allowed_definers: allowed_definers
            .iter()
            .map(|pattern| (*pattern).to_owned())
            .collect(),
        ..LintSettings::default()
    };
    lint(model, &settings)
        .into_iter()
        .filter(|finding: &Finding| finding.rule == rule)
        .map(|finding| (finding.object, finding.message))
        .collect()
}

/// The objects `rule` finds in `model` under the default settings.
pub(super) fn objects(model: &DatabaseModel, rule: Rule) -> Vec<String> {
    found(model, rule, &[])
        .into_iter()
        .map(|(object, _)| object)
        .collect()
}
