//! YAML besides the configuration (the script provider's replies, the shipped price table,
//! values typed after `agents set`) read by the configuration's reader: the same limits on
//! nesting, values and alias expansion, plain scalars resolved the same way, and every
//! error at a line and column.

use std::cell::RefCell;

use serde::de::DeserializeOwned;

use super::de::De;
use super::tree::{self, Kind, Node, Pos, Problem, Scalar};

/// A YAML document as a JSON value, under the same limits as the configuration's reading;
/// `None` when it does not read.
pub fn yaml_value(text: &str) -> Option<serde_json::Value> {
    read_yaml(text, "YAML").ok()
}

/// Reads one YAML document into `T`. An unknown key of a struct, a duplicate key and a
/// second document are errors; an empty text is null. `file` names the file in messages.
pub(crate) fn read_yaml<T: DeserializeOwned>(text: &str, file: &str) -> Result<T, Problem> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let parsed = tree::parse(text, file)?;
    if let Some(problem) = parsed.problems.into_iter().next() {
        return Err(problem);
    }
    let root = parsed.root.unwrap_or(Node {
        pos: Pos::START,
        kind: Kind::Scalar(Scalar {
            value: String::new(),
            plain: true,
        }),
    });
    let unknown = RefCell::new(Vec::new());
    let result = T::deserialize(De {
        node: &root,
        path: String::new(),
        unknown: &unknown,
    });
    let error = match (result, unknown.into_inner().into_iter().next()) {
        (Ok(value), None) => return Ok(value),
        (_, Some(error)) | (Err(error), None) => error,
    };
    Err(Problem {
        pos: error.pos.unwrap_or(root.pos),
        message: error.full_message(),
        hint: error.hint,
    })
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::{json, Value};

    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)] // read only by its Debug, when a test fails
    struct Pair {
        a: u64,
        #[serde(default)]
        b: Option<Vec<String>>,
    }

    #[test]
    fn values_resolve_like_the_configuration() {
        let v: Value = read_yaml(
            "n: 12\nf: 1.5\nt: true\nz: ~\ns: '12'\nl: [a, 2]\n",
            "f.yaml",
        )
        .expect("reads");
        assert_eq!(
            v,
            json!({"n": 12, "f": 1.5, "t": true, "z": null, "s": "12", "l": ["a", 2]})
        );
        assert_eq!(
            read_yaml::<Value>("", "f.yaml").expect("empty"),
            Value::Null
        );
    }

    #[test]
    fn errors_name_the_line_and_column() {
        let e = read_yaml::<Pair>("a: 1\nc: 2\n", "f.yaml").expect_err("unknown key");
        assert_eq!((e.pos.line, e.pos.column), (2, 1));
        assert!(e.message.contains("unknown key `c`"), "{}", e.message);
        let e = read_yaml::<Pair>("a: 1\nb: [x, {y: 1}]\n", "f.yaml").expect_err("type");
        assert_eq!(e.pos.line, 2, "{}", e.message);
        assert!(e.message.starts_with("b[1]"), "{}", e.message);
        let e = read_yaml::<Pair>("a: 1\na: 2\n", "f.yaml").expect_err("duplicate");
        assert!(e.message.contains("duplicate key `a`"), "{}", e.message);
        let e = read_yaml::<Pair>("a: 1\n---\na: 2\n", "f.yaml").expect_err("two documents");
        assert!(
            e.message.contains("f.yaml holds exactly one"),
            "{}",
            e.message
        );
    }

    #[test]
    fn alias_bombs_and_deep_nesting_are_refused() {
        let bomb = format!(
            "big: &big \"{}\"\nl: [{}]\n",
            "x".repeat(1 << 20),
            vec!["*big"; 100].join(", ")
        );
        let e = read_yaml::<Value>(&bomb, "f.yaml").expect_err("alias bomb");
        assert!(e.message.contains("alias bomb"), "{}", e.message);
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(read_yaml::<Value>(&deep, "f.yaml").is_err());
    }
}
