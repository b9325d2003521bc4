//! Whether changing a column's definition can lose data: the type changes that only widen (a
//! longer string, a wider integer of compatible sign or bit field, a decimal with as many digits
//! on both sides, an enumeration or set that keeps every value it had, in any order, a finer time)
//! keep every value, whatever `ZEROFILL` does, which only pads what is shown; any other type
//! change, a conversion to another character set than `utf8mb4`, `NOT NULL` added, or a stored
//! column made generated, may not. Generated columns hold nothing of their own, so changing one
//! never loses data.

use crate::snapshot::model::Column;

/// Why changing `from` into `to` may lose data, or `None` when it cannot.
pub(super) fn data_loss(from: &Column, to: &Column) -> Option<String> {
    if to.generated.is_some() && from.generated.is_none() {
        return Some("the column's values are replaced by computed ones".to_owned());
    }
    if to.generated.is_some() {
        return None;
    }
    if from.nullable && !to.nullable {
        return Some("`NOT NULL` is added: rows holding NULL are changed or refused".to_owned());
    }
    if from.column_type != to.column_type && !widens(&from.column_type, &to.column_type) {
        return Some(format!(
            "the type changes from {} to {}, which may not hold every value",
            from.column_type, to.column_type
        ));
    }
    if let (Some(old), Some(new)) = (&from.charset, &to.charset)
        && old != new
        && new != "utf8mb4"
    {
        return Some(format!(
            "the character set changes from {old} to {new}, which may not hold every character"
        ));
    }
    None
}

/// A column type split into its name, its arguments and its attributes: `decimal(10,2)
/// unsigned` is `("decimal", ["10", "2"], true)`.
struct Type<'a> {
    name: &'a str,
    arguments: Vec<&'a str>,
    unsigned: bool,
}

fn parse(text: &str) -> Type<'_> {
    let (head, rest) = match text.find('(') {
        Some(open) => {
            let close = text.rfind(')').unwrap_or(text.len());
            (&text[..open], text.get(open + 1..close).unwrap_or_default())
        }
        None => (text.split(' ').next().unwrap_or(text), ""),
    };
    Type {
        name: head.trim(),
        arguments: if rest.is_empty() {
            Vec::new()
        } else {
            split_arguments(rest)
        },
        unsigned: text.contains(" unsigned"),
    }
}

/// The comma-separated arguments of a type, commas inside quotes kept (`'a,b','c'`).
fn split_arguments(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut quoted) = (0, false);
    let bytes = text.as_bytes();
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'\'' if quoted && bytes.get(index + 1) == Some(&b'\'') => index += 1,
            b'\'' => quoted = !quoted,
            b',' if !quoted => {
                parts.push(&text[start..index]);
                start = index + 1;
            }
            _ => {}
        }
        index += 1;
    }
    parts.push(&text[start..]);
    parts
}

fn number(argument: Option<&&str>) -> Option<u64> {
    argument.and_then(|text| text.trim().parse().ok())
}

/// The rank of an integer type by width.
fn integer_rank(name: &str) -> Option<u32> {
    ["tinyint", "smallint", "mediumint", "int", "bigint"]
        .iter()
        .position(|known| *known == name)
        .map(|rank| rank as u32)
}

/// The capacity in bytes of a text or blob type.
fn long_rank(name: &str) -> Option<(bool, u32)> {
    let text = ["tinytext", "text", "mediumtext", "longtext"];
    let blob = ["tinyblob", "blob", "mediumblob", "longblob"];
    if let Some(rank) = text.iter().position(|known| *known == name) {
        return Some((true, rank as u32));
    }
    blob.iter()
        .position(|known| *known == name)
        .map(|rank| (false, rank as u32))
}

/// Whether every value of type `from` is a value of type `to`.
fn widens(from: &str, to: &str) -> bool {
    // `ZEROFILL` only pads what is shown; the values are the same (it makes a column
    // `UNSIGNED`, which the server spells out).
    let (old, new) = (parse(from), parse(to));
    if let (Some(a), Some(b)) = (integer_rank(old.name), integer_rank(new.name)) {
        // The display width says nothing of the values.
        return match (old.unsigned, new.unsigned) {
            (false, false) | (true, true) => b >= a,
            (true, false) => b > a,
            (false, true) => false,
        };
    }
    match (old.name, new.name) {
        ("char" | "varchar", "char" | "varchar") | ("binary" | "varbinary", "varbinary") => {
            number(old.arguments.first()) <= number(new.arguments.first())
        }
        ("binary", "binary") => old.arguments == new.arguments,
        ("bit", "bit") => number(old.arguments.first()) <= number(new.arguments.first()),
        ("char" | "varchar" | "binary" | "varbinary", _) => {
            // A string moved into a long type: the capacity in characters must suffice even at
            // four bytes each.
            let characters = number(old.arguments.first()).unwrap_or(u64::MAX);
            let text = old.name.ends_with("char");
            match long_rank(new.name) {
                Some((is_text, rank)) if is_text == text => {
                    characters.saturating_mul(4)
                        < [255, 65_535, 16_777_215, u64::MAX][rank as usize]
                }
                _ => false,
            }
        }
        ("decimal", "decimal") => {
            let digits = |t: &Type| {
                let precision = number(t.arguments.first()).unwrap_or(10);
                let scale = number(t.arguments.get(1)).unwrap_or(0);
                (precision.saturating_sub(scale), scale)
            };
            let ((old_int, old_scale), (new_int, new_scale)) = (digits(&old), digits(&new));
            new_int >= old_int && new_scale >= old_scale && (old.unsigned || !new.unsigned)
        }
        ("float", "double") => old.arguments.is_empty() && (old.unsigned || !new.unsigned),
        // The server converts each value by its text, so any order holds every value the new
        // list still names.
        ("enum", "enum") | ("set", "set") => old
            .arguments
            .iter()
            .all(|value| new.arguments.contains(value)),
        ("date", "datetime") => true,
        ("datetime", "datetime") | ("time", "time") | ("timestamp", "timestamp") => {
            number(old.arguments.first()).unwrap_or(0) <= number(new.arguments.first()).unwrap_or(0)
        }
        (a, b) => match (long_rank(a), long_rank(b)) {
            (Some((text_a, rank_a)), Some((text_b, rank_b))) => {
                text_a == text_b && rank_b >= rank_a
            }
            _ => false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_widening_type_changes_keep_every_value() {
        for (from, to) in [
            ("varchar(10)", "varchar(20)"),
            ("char(10)", "varchar(10)"),
            ("int(11)", "bigint(20)"),
            ("int", "int(10)"),
            ("smallint(5) unsigned", "int(11)"),
            ("int(10) unsigned", "bigint(20) unsigned"),
            ("decimal(10,2)", "decimal(12,4)"),
            ("float", "double"),
            ("enum('a','b')", "enum('a','b','c,d')"),
            ("enum('a','c')", "enum('c','b','a')"),
            ("set('x','y')", "set('y','z','x')"),
            ("int(6) unsigned zerofill", "int(6) unsigned"),
            ("int(10) unsigned", "int(10) unsigned zerofill"),
            ("mediumint(8) unsigned", "int(11)"),
            ("bit(1)", "bit(8)"),
            ("text", "mediumtext"),
            ("varchar(100)", "text"),
            ("datetime", "datetime(6)"),
            ("date", "datetime"),
        ] {
            assert!(widens(from, to), "{from} → {to}");
        }
        for (from, to) in [
            ("varchar(20)", "varchar(10)"),
            ("bigint(20)", "int(11)"),
            ("int(11)", "int(10) unsigned"),
            ("int(10) unsigned", "int(11)"),
            ("decimal(10,2)", "decimal(10,4)"),
            ("double", "float"),
            ("enum('a','b')", "enum('a')"),
            ("set('x','y')", "set('y','z')"),
            ("int(11)", "int(11) unsigned zerofill"),
            ("bit(8)", "bit(1)"),
            ("mediumtext", "text"),
            ("varchar(20000)", "text"),
            ("datetime(6)", "datetime"),
            ("varchar(10)", "int(11)"),
            ("text", "blob"),
        ] {
            assert!(!widens(from, to), "{from} → {to}");
        }
    }

    #[test]
    fn nullability_charsets_and_generation_decide_too() {
        let column = |column_type: &str, nullable: bool, charset: Option<&str>| Column {
            name: "c".to_owned(),
            column_type: column_type.to_owned(),
            nullable,
            charset: charset.map(str::to_owned),
            ..Column::default()
        };
        let base = column("varchar(10)", true, Some("latin1"));
        assert_eq!(
            data_loss(&base, &column("varchar(20)", true, Some("utf8mb4"))),
            None
        );
        assert!(data_loss(&base, &column("varchar(10)", false, Some("latin1"))).is_some());
        assert!(data_loss(&base, &column("varchar(10)", true, Some("ascii"))).is_some());
        assert!(data_loss(&base, &column("varchar(5)", true, Some("latin1"))).is_some());
    }
}
