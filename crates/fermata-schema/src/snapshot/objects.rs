//! Each object's `SHOW CREATE`, spread over the snapshot's connections and sent many statements
//! to a request (one at a time where the server, or a proxy before it, runs one statement to a
//! request), and its canonical file: the model's rendering of the object, checked against the
//! server's text as soon as that text arrives, while the server answers the request's next
//! `SHOW CREATE`. What only the text says is read from it first: routines' parameter lists, views'
//! algorithms, tables' periods, `WITHOUT OVERLAPS`, `DEFAULT` list partitions and system-time
//! partitioning clauses. An object that does not check is refused by name.

use std::collections::BTreeMap;

use fermata_schema_core::{
    DatabaseName, ErrorCode, ObjectKind, ObjectSubject, Reason, SafeError, Subject,
};
use futures::TryStreamExt;
use sqlx::Either;
use sqlx::Executor;
use sqlx::mysql::{MySqlConnection, MySqlRow};

use super::catalog::refuse;
use super::model::{DatabaseModel, Event, Flavor, Routine, Sequence, Table, Trigger, View};
use super::{normalize, render, routine_path};
use crate::names;
use crate::safe_context::{SafeCode, caused};
use crate::source::{DriverContext, DriverFailure, mysql_error_number, query_code};

/// One object of the model, with what of it its check fills in.
enum Object<'m> {
    Table(&'m mut Table),
    View(&'m mut View),
    Sequence(&'m Sequence),
    Routine(&'m mut Routine),
    /// With the `FOLLOWS` or `PRECEDES` clause its file says, if any.
    Trigger(&'m Trigger, Option<&'m str>),
    Event(&'m Event),
}

impl Object<'_> {
    fn kind(&self) -> ObjectKind {
        match self {
            Object::Table(_) => ObjectKind::Table,
            Object::View(_) => ObjectKind::View,
            Object::Sequence(_) => ObjectKind::Sequence,
            Object::Routine(routine) => routine.kind.object_kind(),
            Object::Trigger(..) => ObjectKind::Trigger,
            Object::Event(_) => ObjectKind::Event,
        }
    }

    fn name(&self) -> &str {
        match self {
            Object::Table(table) => &table.name,
            Object::View(view) => &view.name,
            Object::Sequence(sequence) => &sequence.name,
            Object::Routine(routine) => &routine.name,
            Object::Trigger(trigger, _) => &trigger.name,
            Object::Event(event) => &event.name,
        }
    }

    /// The object's file (its path and content), once the model renders to exactly the server's
    /// `text` in canonical form.
    fn file(
        &mut self,
        text: &str,
        database: &DatabaseName,
        flavor: Flavor,
    ) -> Result<(String, Vec<u8>), SafeError> {
        let kind = self.kind();
        let refused = |name: &str, reason| refuse(database, kind, name, reason);
        // The server's text in canonical form, and the model's.
        let (server, canonical) = match self {
            Object::Table(table) => {
                normalize::table_facts(text, table, flavor)
                    .map_err(|reason| refused(&table.name, reason))?;
                (
                    normalize::table(text, table, flavor),
                    render::render_table(table, flavor),
                )
            }
            Object::View(view) => {
                view.algorithm = normalize::view_algorithm(text)
                    .ok_or_else(|| refused(&view.name, Reason::UnreadableDefinition))?;
                (
                    normalize::view(text, database.as_str()),
                    render::render_view(view),
                )
            }
            Object::Sequence(sequence) => {
                (normalize::sequence(text), render::render_sequence(sequence))
            }
            Object::Routine(routine) => {
                let text = normalize::routine(text, routine, database.as_str(), flavor)
                    .filter(|text| normalize::parameters_match(routine, &text.parameter_list))
                    .ok_or_else(|| refused(&routine.name, Reason::DefinitionMismatch))?;
                routine.parameter_list = text.parameter_list;
                (Some(text.canonical), render::render_routine(routine))
            }
            Object::Trigger(trigger, _) => (
                normalize::trigger(text, database.as_str(), &trigger.sql_mode),
                render::render_trigger(trigger, None),
            ),
            Object::Event(event) => (normalize::event(text), render::render_event(event)),
        };
        if server.as_deref() != Some(canonical.as_str()) {
            tracing::warn!(database = %database, kind = kind.name(), "an object's model does not match the server's definition; the database is not snapshotted");
            return Err(refused(self.name(), Reason::DefinitionMismatch));
        }
        let (path, content) = match self {
            Object::Routine(routine) => (routine_path(routine)?, canonical),
            // A trigger's file also says where it goes among its table's triggers.
            Object::Trigger(trigger, order) => (
                names::object_path(kind.plural(), None, &trigger.name)?,
                render::render_trigger(trigger, *order),
            ),
            object => (
                names::object_path(kind.plural(), None, object.name())?,
                canonical,
            ),
        };
        Ok((path, format!("{content}\n").into_bytes()))
    }
}

/// How many `SHOW CREATE` statements one request carries. The server runs them one after another
/// and streams each answer as it is ready, so the objects are checked while it works ahead, and
/// it reads one request, not one per object: the `mariadb` client's 20,000 `SHOW CREATE TABLE`
/// over one connection, 50 to a request, took the server a little over half the processor time
/// they took sent one by one.
const STATEMENTS_PER_REQUEST: usize = 64;

/// The canonical file of every object of `model`, by path, each read with `SHOW CREATE` over one
/// of `connections` (the objects shared out in order, each connection's share sent in batches of
/// [`STATEMENTS_PER_REQUEST`]) and checked as it comes. A failed `SHOW CREATE` is the error,
/// the first in the objects' order; otherwise the first object, in order, that does not check.
pub(super) async fn checked_files(
    connections: &mut [MySqlConnection],
    database: &DatabaseName,
    model: &mut DatabaseModel,
) -> Result<BTreeMap<String, Vec<u8>>, SafeError> {
    let flavor = model.flavor;
    let order = render::trigger_order(&model.triggers);
    let mut objects: Vec<Object> =
        model
            .tables
            .iter_mut()
            .map(Object::Table)
            .chain(model.views.iter_mut().map(Object::View))
            .chain(model.sequences.iter().map(Object::Sequence))
            .chain(model.routines.iter_mut().map(Object::Routine))
            .chain(model.triggers.iter().map(|trigger| {
                Object::Trigger(trigger, order.get(&trigger.name).map(String::as_str))
            }))
            .chain(model.events.iter().map(Object::Event))
            .collect();
    let count = objects.len();
    let share = count.div_ceil(connections.len().max(1)).max(1);
    let work = connections.iter_mut().zip(objects.chunks_mut(share)).map(
        |(connection, chunk)| async move {
            let mut files = Vec::with_capacity(chunk.len());
            let (mut at, mut per_request) = (0, STATEMENTS_PER_REQUEST);
            while at < chunk.len() {
                let end = chunk.len().min(at + per_request);
                let batch = &mut chunk[at..end];
                if check_batch(connection, database, flavor, batch, &mut files).await? {
                    at = end;
                } else {
                    per_request = 1;
                }
            }
            Ok::<_, SafeError>(files)
        },
    );
    let mut all = Vec::with_capacity(count);
    for files in futures::future::join_all(work).await {
        all.extend(files?);
    }
    all.into_iter().collect()
}

/// Sends the `SHOW CREATE` of every object of `batch` in one request and adds each object's file,
/// or the reason it does not check, to `files` as its answer arrives. A failed `SHOW CREATE` is
/// the error, and the server runs none of the batch's statements after it. Answers `false`, having
/// added nothing, when the server (or a proxy before it) took a request of several statements for
/// one it cannot parse: the caller then sends them one to a request.
async fn check_batch(
    connection: &mut MySqlConnection,
    database: &DatabaseName,
    flavor: Flavor,
    batch: &mut [Object<'_>],
    files: &mut Vec<Result<(String, Vec<u8>), SafeError>>,
) -> Result<bool, SafeError> {
    let Some(last) = batch.len().checked_sub(1) else {
        return Ok(true);
    };
    let sql = batch
        .iter()
        .map(|object| show_create(database, object.kind(), object.name()))
        .collect::<Vec<_>>()
        .join(";\n");
    // The text protocol: no prepared statement for the server to invalidate when an object
    // changes, and several statements in one request.
    let mut answers = connection.fetch_many(sql.as_str());
    let mut first_row = None;
    let mut answered = 0;
    let refused = loop {
        // The statement answered, or for an answer the batch did not ask for, its last.
        let failed = |error: &sqlx::Error, answered: usize| {
            let object = &batch[answered.min(last)];
            show_create_error(error, database, object.kind(), object.name())
        };
        match answers.try_next().await {
            // ER_PARSE_ERROR before any answer: the statements, each valid alone, were read as
            // one.
            Err(error) if answered == 0 && last > 0 && mysql_error_number(&error) == Some(1064) => {
                return Ok(false);
            }
            // The server runs nothing of the request after a failed statement: its answers end.
            Err(error) => return Err(failed(&error, answered)),
            Ok(Some(Either::Right(row))) if answered <= last => {
                first_row.get_or_insert(row);
            }
            // The end of one statement's answer.
            Ok(Some(Either::Left(_))) if answered <= last => {
                let Some(row) = first_row.take() else {
                    break failed(&sqlx::Error::RowNotFound, answered);
                };
                let object = &mut batch[answered];
                match definition(&row, database, object.kind(), object.name()) {
                    Ok(text) => files.push(object.file(&text, database, flavor)),
                    Err(error) => break error,
                }
                answered += 1;
            }
            Ok(None) if answered > last => return Ok(true),
            Ok(None) => return Err(failed(&sqlx::Error::RowNotFound, answered)),
            // An answer the batch did not ask for.
            Ok(Some(_)) => break failed(&sqlx::Error::RowNotFound, answered),
        }
    };
    // The refusal is answered once the request's answers are read to their end: the driver only
    // knows a request has ended when it reads past its last answer, and until then the
    // connection's next request would wait for answers that never come.
    while let Ok(Some(_)) = answers.try_next().await {}
    Err(refused)
}

/// The statement that shows the definition of the object `kind` `name`.
fn show_create(database: &DatabaseName, kind: ObjectKind, name: &str) -> String {
    let keyword = match kind {
        ObjectKind::Table => "TABLE",
        ObjectKind::View => "VIEW",
        ObjectKind::Sequence => "SEQUENCE",
        ObjectKind::Function => "FUNCTION",
        ObjectKind::Procedure => "PROCEDURE",
        ObjectKind::Trigger => "TRIGGER",
        ObjectKind::Event => "EVENT",
    };
    format!(
        "SHOW CREATE {keyword} {}.{}",
        render::identifier(database.as_str()),
        render::identifier(name)
    )
}

/// The definition in `row`, the answer to the `SHOW CREATE` of the object `kind` `name`.
fn definition(
    row: &MySqlRow,
    database: &DatabaseName,
    kind: ObjectKind,
    name: &str,
) -> Result<String, SafeError> {
    // The statement's column: after the name, and for stored programs after the `sql_mode`
    // (and an event's time zone) they were created with.
    let column = match kind {
        ObjectKind::Procedure | ObjectKind::Function | ObjectKind::Trigger => 2,
        ObjectKind::Event => 3,
        _ => 1,
    };
    let unreadable = || refuse(database, kind, name, Reason::UnreadableDefinition);
    // NULL when the account may not read a routine's definition.
    let bytes: Option<Vec<u8>> =
        sqlx::Row::try_get_unchecked(row, column).or_unreadable(unreadable)?;
    let bytes = bytes.ok_or_else(|| denied(database, kind, name))?;
    String::from_utf8(bytes).or_safe(unreadable)
}

/// `PERMISSION_DENIED` naming the object `kind` `name` the account may not read.
fn denied(database: &DatabaseName, kind: ObjectKind, name: &str) -> SafeError {
    let mut object = ObjectSubject::kind(database, kind);
    object.name = fermata_schema_core::ObjectName::new(name).ok();
    SafeError::about(ErrorCode::PermissionDenied, Subject::Object(object))
}

/// What a failed `SHOW CREATE` means: an object dropped since the catalog listed it, or made
/// again as another kind of object, is a schema change (retried); a privilege the account lacks for this kind of object names the object;
/// anything else is the server error's own code. The driver's failure is kept as the cause.
fn show_create_error(
    error: &sqlx::Error,
    database: &DatabaseName,
    kind: ObjectKind,
    name: &str,
) -> SafeError {
    let safe_error = match mysql_error_number(error) {
        // ER_NO_SUCH_TABLE, ER_SP_DOES_NOT_EXIST, ER_TRG_DOES_NOT_EXIST,
        // ER_EVENT_DOES_NOT_EXIST, MariaDB's ER_UNKNOWN_SEQUENCES; ER_WRONG_OBJECT (a view that
        // is now a table) and MariaDB's ER_NOT_SEQUENCE (a sequence that is now a table)
        Some(1146 | 1305 | 1360 | 1539 | 4091 | 1347 | 4089) => SafeError::about(
            ErrorCode::SchemaChanged,
            Subject::Database(database.clone()),
        ),
        // ER_BAD_DB_ERROR
        Some(1049) => SafeError::about(
            ErrorCode::DatabaseNoLongerVisible,
            Subject::Database(database.clone()),
        ),
        _ => match query_code(error) {
            ErrorCode::PermissionDenied => denied(database, kind, name),
            code => SafeError::about(code, Subject::Database(database.clone())),
        },
    };
    caused(
        safe_error,
        "show an object's definition",
        DriverFailure::of(error),
    )
}
