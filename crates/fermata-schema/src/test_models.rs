//! Small models for unit tests: a database, a table, a column, an index and a routine, in MariaDB's
//! spelling, which the lint rules' and the migration plans' tests build on.

use crate::snapshot::model::{
    Column, DatabaseModel, Flavor, Index, IndexKind, IndexPart, Routine, RoutineKind, Table,
};

/// A MariaDB database `shop` in utf8mb4 holding `tables`.
pub(crate) fn model(tables: Vec<Table>) -> DatabaseModel {
    DatabaseModel {
        name: "shop".to_owned(),
        flavor: Flavor::Mariadb,
        default_charset: "utf8mb4".to_owned(),
        default_collation: "utf8mb4_general_ci".to_owned(),
        tables,
        views: vec![],
        sequences: vec![],
        routines: vec![],
        triggers: vec![],
        events: vec![],
    }
}

/// An InnoDB utf8mb4 table.
pub(crate) fn table(name: &str, columns: Vec<Column>, indexes: Vec<Index>) -> Table {
    Table {
        name: name.to_owned(),
        engine: "InnoDB".to_owned(),
        charset: "utf8mb4".to_owned(),
        collation: "utf8mb4_general_ci".to_owned(),
        columns,
        indexes,
        ..Table::default()
    }
}

/// A NOT NULL column of `column_type`, without a character set.
pub(crate) fn column(name: &str, column_type: &str) -> Column {
    Column {
        name: name.to_owned(),
        column_type: column_type.to_owned(),
        ..Column::default()
    }
}

/// An index over whole columns, ascending.
pub(crate) fn index(name: &str, kind: IndexKind, columns: &[&str]) -> Index {
    Index {
        name: name.to_owned(),
        kind,
        parts: columns
            .iter()
            .map(|column| IndexPart {
                column: (*column).to_owned(),
                expression: None,
                prefix: None,
                descending: false,
            })
            .collect(),
        using: None,
        comment: String::new(),
        ignored: false,
        invisible: false,
        without_overlaps: None,
    }
}

/// A routine `name` of `kind` by `definer`, with an empty body and no parameters.
pub(crate) fn routine(name: &str, kind: RoutineKind, definer: &str) -> Routine {
    Routine {
        name: name.to_owned(),
        kind,
        parameters: vec![],
        parameter_list: String::new(),
        returns: None,
        deterministic: false,
        data_access: "CONTAINS SQL".to_owned(),
        security: "DEFINER".to_owned(),
        comment: String::new(),
        body: "BEGIN END".to_owned(),
        definer: definer.to_owned(),
        sql_mode: String::new(),
    }
}
