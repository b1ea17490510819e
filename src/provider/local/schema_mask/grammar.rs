//! A JSON Schema of the supported subset compiled into the grammar the recognizer walks: a
//! graph of nodes (a `$ref` is an edge, so recursive schemas are cycles), each a set of JSON
//! types with the rules of each, a list of literal encodings (`enum`, `const`), a choice of
//! branches (`anyOf`) or any value.
//!
//! The grammar generates a subset of what the schema accepts, never more: numbers without
//! exponents, keys in their canonical spelling, and no property the schema does not declare
//! unless it says what others may be (`additionalProperties` as a schema or `true`, or an
//! object that declares none). Every value it generates validates; the engine checks each
//! reply against the whole schema all the same.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::numbers::{self, NumRule};

pub type NodeId = u32;

/// Any JSON value.
pub const ANY: NodeId = 0;
/// The literals `false` and `true`.
pub const BOOLS: NodeId = 1;
/// The literal `null`.
pub const NULL: NodeId = 2;

pub const T_NULL: u8 = 1;
pub const T_BOOL: u8 = 2;
pub const T_INT: u8 = 4;
pub const T_NUM: u8 = 8;
pub const T_STR: u8 = 16;
pub const T_ARR: u8 = 32;
pub const T_OBJ: u8 = 64;
pub const T_ALL: u8 = 127;

/// Properties one object may declare (their set of seen keys is one `u64`).
pub const MAX_PROPERTIES: usize = 64;
/// `$ref`s merged with the keywords beside them, nested: a bound on recursive merges.
const MAX_MERGES: usize = 32;
/// Nodes of one grammar: a schema that references a definition with keywords beside it at
/// every level compiles a copy each time, so the copies are bounded.
const MAX_NODES: usize = 1 << 16;

#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    Any,
    Typed(Box<Typed>),
    /// The canonical (compact) encodings of the allowed values, sorted by their bytes.
    Literals(Vec<Vec<u8>>),
    AnyOf(Vec<NodeId>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Typed {
    pub types: u8,
    pub min_len: u32,
    pub max_len: Option<u32>,
    pub num: NumRule,
    pub items: NodeId,
    pub min_items: u32,
    pub max_items: Option<u32>,
    /// Declared properties, sorted by their keys' bytes.
    pub props: Vec<Prop>,
    /// Bit `i`: `props[i]` is required.
    pub required: u64,
    /// What an undeclared property may hold; `None`: none is generated.
    pub additional: Option<NodeId>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Prop {
    /// The key as it appears between its quotes (JSON's escapes, as serde_json writes them).
    pub key: Vec<u8>,
    pub node: NodeId,
}

/// The compiled schema.
#[derive(Clone, Debug)]
pub struct Grammar {
    pub nodes: Vec<Node>,
    pub root: NodeId,
    /// The fewest bytes of a value of each node.
    pub min_bytes: Vec<u32>,
}

impl Grammar {
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize]
    }

    pub fn min(&self, id: NodeId) -> u32 {
        self.min_bytes[id as usize]
    }

    /// The grammar of `schema` (checked by `crate::schema::check`); an error says what the
    /// local model cannot constrain.
    pub fn compile(schema: &Value) -> Result<Grammar, String> {
        let mut c = Compiler {
            root: schema,
            nodes: vec![
                Node::Any,
                Node::Literals(vec![b"false".to_vec(), b"true".to_vec()]),
                Node::Literals(vec![b"null".to_vec()]),
            ],
            refs: HashMap::new(),
            merges: 0,
        };
        let root = c
            .node(schema)?
            .ok_or("the schema is `false`: no value matches it")?;
        let min_bytes = min_bytes(&c.nodes)?;
        // Branches with the smallest values first: the recognizer follows a bounded number of
        // branches at once, and the ones it keeps must include a value that fits the budget.
        for node in &mut c.nodes {
            if let Node::AnyOf(ids) = node {
                ids.sort_by_key(|&id| min_bytes[id as usize]);
            }
        }
        if min_bytes[root as usize] >= INFINITE {
            return Err(
                "the schema has no finite value (a required property or item refers \
                        back to itself)"
                    .into(),
            );
        }
        Ok(Grammar {
            nodes: c.nodes,
            root,
            min_bytes,
        })
    }
}

struct Compiler<'a> {
    root: &'a Value,
    nodes: Vec<Node>,
    /// `$ref` target → its node (assigned before the target is compiled: cycles close).
    refs: HashMap<String, NodeId>,
    merges: usize,
}

impl<'a> Compiler<'a> {
    fn push(&mut self, node: Node) -> NodeId {
        self.nodes.push(node);
        (self.nodes.len() - 1) as NodeId
    }

    /// The node of `schema`; `None` for a schema no value matches.
    fn node(&mut self, schema: &Value) -> Result<Option<NodeId>, String> {
        if self.nodes.len() > MAX_NODES {
            return Err(format!(
                "the schema makes more than {MAX_NODES} rules for the local model (a definition \
                 referenced with other keywords beside it, at every level)"
            ));
        }
        let map = match schema {
            Value::Bool(true) => return Ok(Some(ANY)),
            Value::Bool(false) => return Ok(None),
            Value::Object(map) => map,
            _ => return Err("a schema must be an object or a boolean".into()),
        };
        if let Some(Value::String(target)) = map.get("$ref") {
            let rest = without(map, &["$ref"]);
            if !rest.keys().any(|k| is_constraint(k)) {
                return self.reference(target).map(Some);
            }
            let resolved = self.target(target)?.clone();
            return self.merged(&resolved, &rest);
        }
        if let Some(Value::Array(branches)) = map.get("anyOf") {
            return self.any_of(map, branches);
        }
        if map.contains_key("enum") || map.contains_key("const") {
            return Ok(self.literals(map));
        }
        self.typed(map)
    }

    fn target(&self, target: &str) -> Result<&'a Value, String> {
        let root: &'a Value = self.root;
        crate::schema::resolve_ref(root, target).map_err(|why| format!("$ref {target}: {why}"))
    }

    fn reference(&mut self, target: &str) -> Result<NodeId, String> {
        if let Some(&id) = self.refs.get(target) {
            return Ok(id);
        }
        let schema = self.target(target)?;
        // Reserved first, so a reference back to it inside closes a cycle.
        let id = self.push(Node::Any);
        self.refs.insert(target.to_owned(), id);
        let node = match self.node(schema)? {
            Some(inner) => Node::AnyOf(vec![inner]),
            None => return Err(format!("$ref {target} names a schema no value matches")),
        };
        self.nodes[id as usize] = node;
        Ok(id)
    }

    /// `base` with the constraints of `extra` laid over it (`$ref` or `anyOf` beside other
    /// keywords: both apply).
    fn merged(
        &mut self,
        base: &Value,
        extra: &Map<String, Value>,
    ) -> Result<Option<NodeId>, String> {
        self.merges += 1;
        if self.merges > MAX_MERGES {
            return Err("`$ref` beside other keywords nests too deeply".into());
        }
        let result = match base {
            Value::Bool(false) => Ok(None),
            Value::Bool(true) => self.node(&Value::Object(extra.clone())),
            Value::Object(base) => match intersect(base, extra)? {
                Some(map) => self.node(&Value::Object(map)),
                None => Ok(None),
            },
            _ => Err("a schema must be an object or a boolean".into()),
        };
        self.merges -= 1;
        result
    }

    fn any_of(
        &mut self,
        map: &Map<String, Value>,
        branches: &[Value],
    ) -> Result<Option<NodeId>, String> {
        let rest = without(map, &["anyOf"]);
        let shared = rest.keys().any(|k| is_constraint(k));
        let mut ids = Vec::new();
        for branch in branches {
            let id = if shared {
                self.merged(branch, &rest)?
            } else {
                self.node(branch)?
            };
            let Some(id) = id else { continue };
            match &self.nodes[id as usize] {
                Node::AnyOf(inner) if !self.refs.values().any(|&r| r == id) => {
                    ids.extend(inner.clone())
                }
                _ => ids.push(id),
            }
        }
        ids.dedup();
        // Branches that are lists of values (`const`, `enum`) are one list: every value
        // stays reachable however many there are.
        let (lists, mut ids): (Vec<NodeId>, Vec<NodeId>) = ids
            .into_iter()
            .partition(|&id| matches!(self.nodes[id as usize], Node::Literals(_)));
        if lists.len() > 1 {
            let mut all: Vec<Vec<u8>> = lists
                .iter()
                .flat_map(|&id| match &self.nodes[id as usize] {
                    Node::Literals(l) => l.clone(),
                    _ => Vec::new(),
                })
                .collect();
            all.sort();
            all.dedup();
            ids.push(self.push(Node::Literals(all)));
        } else {
            ids.extend(lists);
        }
        // Any number of other branches: the recognizer follows at most `MAX_ALTS` at once
        // (those with the smallest values, see `Grammar::compile`) and drops the rest, which
        // only narrows what is generated.
        match ids.len() {
            0 => Ok(None),
            1 => Ok(Some(ids[0])),
            _ => Ok(Some(self.push(Node::AnyOf(ids)))),
        }
    }

    /// `enum` and `const`: the values that also pass the schema's other simple rules.
    fn literals(&mut self, map: &Map<String, Value>) -> Option<NodeId> {
        let mut values: Vec<&Value> = match map.get("enum") {
            Some(Value::Array(v)) => v.iter().collect(),
            _ => vec![map.get("const")?],
        };
        if let (Some(c), true) = (map.get("const"), map.contains_key("enum")) {
            values.retain(|v| *v == c);
        }
        let rest = without(map, &["enum", "const"]);
        let typed = self.typed_rules(&rest).ok().flatten();
        let mut lits: Vec<Vec<u8>> = values
            .into_iter()
            .filter(|v| typed.as_ref().is_none_or(|t| admits(t, v)))
            .map(|v| serde_json::to_vec(v).unwrap_or_default())
            .collect();
        lits.sort();
        lits.dedup();
        if lits.is_empty() {
            return None;
        }
        Some(self.push(Node::Literals(lits)))
    }

    fn typed(&mut self, map: &Map<String, Value>) -> Result<Option<NodeId>, String> {
        Ok(self
            .typed_rules(map)?
            .map(|t| self.push(Node::Typed(Box::new(t)))))
    }

    fn typed_rules(&mut self, map: &Map<String, Value>) -> Result<Option<Typed>, String> {
        let mut t = Typed {
            types: types_of(map),
            min_len: count(map, "minLength").unwrap_or(0),
            max_len: count(map, "maxLength"),
            num: NumRule {
                min: map.get("minimum").and_then(Value::as_f64),
                max: map.get("maximum").and_then(Value::as_f64),
                integer: false,
            },
            items: ANY,
            min_items: count(map, "minItems").unwrap_or(0),
            max_items: count(map, "maxItems"),
            props: Vec::new(),
            required: 0,
            additional: None,
        };
        if t.types & T_ARR != 0 {
            match map.get("items") {
                Some(items) => match self.node(items)? {
                    Some(id) => t.items = id,
                    None => t.max_items = Some(0),
                },
                None => t.items = ANY,
            }
            if t.max_items.is_some_and(|m| m < t.min_items) {
                t.types &= !T_ARR;
            }
        }
        if t.types & T_OBJ != 0 && !self.object_rules(map, &mut t)? {
            t.types &= !T_OBJ;
        }
        if t.types & (T_INT | T_NUM) != 0 && !numbers::satisfiable(&t.num, t.types & T_NUM == 0) {
            t.types &= !(T_INT | T_NUM);
        }
        if t.max_len.is_some_and(|m| m < t.min_len) {
            t.types &= !T_STR;
        }
        t.num.integer = t.types & T_NUM == 0;
        Ok((t.types != 0).then_some(t))
    }

    /// Fills the object rules of `t`; false when no object matches.
    fn object_rules(&mut self, map: &Map<String, Value>, t: &mut Typed) -> Result<bool, String> {
        let declared = map.get("properties").and_then(Value::as_object);
        let required: Vec<&str> = map
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let additional = match map.get("additionalProperties") {
            Some(schema) => self.node(schema)?,
            // Unsaid: an object that declares properties gets no others; one that declares
            // none may hold any.
            None if declared.is_none_or(|d| d.is_empty()) => Some(ANY),
            None => None,
        };
        let mut props: Vec<(String, NodeId)> = Vec::new();
        for (name, schema) in declared.into_iter().flatten() {
            match self.node(schema)? {
                Some(id) => props.push((name.clone(), id)),
                None if required.contains(&name.as_str()) => return Ok(false),
                None => {}
            }
        }
        for name in &required {
            if props.iter().any(|(n, _)| n == name) {
                continue;
            }
            let declared_false = declared.is_some_and(|d| d.contains_key(*name));
            match additional {
                _ if declared_false => return Ok(false),
                Some(id) => props.push(((*name).to_owned(), id)),
                // Not declared, and no other property is generated: any value will do.
                None if !matches!(map.get("additionalProperties"), Some(Value::Bool(false))) => {
                    props.push(((*name).to_owned(), ANY))
                }
                None => return Ok(false),
            }
        }
        if props.len() > MAX_PROPERTIES {
            return Err(format!(
                "an object with {} properties (the local model follows at most {MAX_PROPERTIES})",
                props.len()
            ));
        }
        let mut props: Vec<(Vec<u8>, String, NodeId)> = props
            .into_iter()
            .map(|(name, id)| {
                let quoted = serde_json::to_vec(&name).unwrap_or_default();
                (quoted[1..quoted.len() - 1].to_vec(), name, id)
            })
            .collect();
        props.sort_by(|a, b| a.0.cmp(&b.0));
        for (i, (_, name, _)) in props.iter().enumerate() {
            if required.contains(&name.as_str()) {
                t.required |= 1 << i;
            }
        }
        t.props = props
            .into_iter()
            .map(|(key, _, node)| Prop { key, node })
            .collect();
        t.additional = additional;
        Ok(true)
    }
}

/// Whether a keyword constrains values (rather than annotating them or holding definitions).
pub(crate) fn is_constraint(key: &str) -> bool {
    crate::schema::SUPPORTED.contains(&key) && !matches!(key, "$defs" | "definitions")
}

fn without(map: &Map<String, Value>, keys: &[&str]) -> Map<String, Value> {
    map.iter()
        .filter(|(k, _)| !keys.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn count(map: &Map<String, Value>, key: &str) -> Option<u32> {
    map.get(key)
        .and_then(Value::as_u64)
        .map(|n| n.min(u64::from(u32::MAX / 4)) as u32)
}

/// The types a schema allows. Without `type`, the kind its keywords describe (an object
/// for `properties`): generating a subset of what it accepts is enough.
fn types_of(map: &Map<String, Value>) -> u8 {
    let bit = |t: &str| match t {
        "null" => T_NULL,
        "boolean" => T_BOOL,
        "integer" => T_INT,
        "number" => T_NUM | T_INT,
        "string" => T_STR,
        "array" => T_ARR,
        "object" => T_OBJ,
        _ => 0,
    };
    match map.get("type") {
        Some(Value::String(t)) => bit(t),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .map(bit)
            .fold(0, |a, b| a | b),
        _ => {
            let has = |keys: &[&str]| keys.iter().any(|k| map.contains_key(*k));
            if has(&["properties", "required", "additionalProperties"]) {
                T_OBJ
            } else if has(&["items", "minItems", "maxItems"]) {
                T_ARR
            } else if has(&["minLength", "maxLength"]) {
                T_STR
            } else if has(&["minimum", "maximum"]) {
                T_NUM | T_INT
            } else {
                T_ALL
            }
        }
    }
}

/// Whether a literal passes a node's type and simple bounds (an `enum` beside `type`).
fn admits(t: &Typed, v: &Value) -> bool {
    match v {
        Value::Null => t.types & T_NULL != 0,
        Value::Bool(_) => t.types & T_BOOL != 0,
        Value::Number(n) => {
            let integral = n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0);
            let typed = t.types & T_NUM != 0 || (t.types & T_INT != 0 && integral);
            let f = n.as_f64().unwrap_or(f64::NAN);
            typed && t.num.min.is_none_or(|m| f >= m) && t.num.max.is_none_or(|m| f <= m)
        }
        Value::String(s) => {
            let n = s.chars().count() as u32;
            t.types & T_STR != 0 && n >= t.min_len && t.max_len.is_none_or(|m| n <= m)
        }
        Value::Array(a) => {
            let n = a.len() as u32;
            t.types & T_ARR != 0 && n >= t.min_items && t.max_items.is_none_or(|m| n <= m)
        }
        Value::Object(_) => t.types & T_OBJ != 0,
    }
}

/// Two schemas' constraints together, where the local model can say it; `None` when no
/// value matches both.
fn intersect(
    a: &Map<String, Value>,
    b: &Map<String, Value>,
) -> Result<Option<Map<String, Value>>, String> {
    let mut out = a.clone();
    for (key, bv) in b {
        let Some(av) = out.get(key).cloned() else {
            out.insert(key.clone(), bv.clone());
            continue;
        };
        if av == *bv || !is_constraint(key) {
            continue;
        }
        let merged = match key.as_str() {
            "type" => {
                let (ta, tb) = (type_names(&av), type_names(bv));
                let both: Vec<Value> = ta
                    .iter()
                    .filter(|t| tb.contains(t))
                    .map(|t| Value::from(t.as_str()))
                    .collect();
                if both.is_empty() {
                    return Ok(None);
                }
                Value::Array(both)
            }
            "required" => {
                let mut names = av.as_array().cloned().unwrap_or_default();
                for n in bv.as_array().into_iter().flatten() {
                    if !names.contains(n) {
                        names.push(n.clone());
                    }
                }
                Value::Array(names)
            }
            "minimum" | "minLength" | "minItems" => max_of(&av, bv),
            "maximum" | "maxLength" | "maxItems" => min_of(&av, bv),
            "enum" => {
                let keep: Vec<Value> = av
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|v| bv.as_array().is_some_and(|b| b.contains(v)))
                    .cloned()
                    .collect();
                if keep.is_empty() {
                    return Ok(None);
                }
                Value::Array(keep)
            }
            "const" => return Ok(None),
            "properties" => {
                let mut props = av.as_object().cloned().unwrap_or_default();
                for (name, schema) in bv.as_object().into_iter().flatten() {
                    match props.get(name) {
                        Some(existing) if existing != schema => match (existing, schema) {
                            (Value::Object(x), Value::Object(y)) => match intersect(x, y)? {
                                Some(m) => {
                                    props.insert(name.clone(), Value::Object(m));
                                }
                                None => {
                                    props.insert(name.clone(), Value::Bool(false));
                                }
                            },
                            _ => return Err(unsupported(key)),
                        },
                        Some(_) => {}
                        None => {
                            props.insert(name.clone(), schema.clone());
                        }
                    }
                }
                Value::Object(props)
            }
            "items" => match (&av, bv) {
                (Value::Object(x), Value::Object(y)) => match intersect(x, y)? {
                    Some(m) => Value::Object(m),
                    None => Value::Bool(false),
                },
                _ => return Err(unsupported(key)),
            },
            _ => return Err(unsupported(key)),
        };
        out.insert(key.clone(), merged);
    }
    Ok(Some(out))
}

fn unsupported(key: &str) -> String {
    format!("`{key}` both inside and beside an `anyOf` or `$ref`, with different values")
}

fn type_names(v: &Value) -> Vec<String> {
    let expand = |t: &str| -> Vec<String> {
        if t == "number" {
            vec!["number".into(), "integer".into()]
        } else {
            vec![t.to_owned()]
        }
    };
    match v {
        Value::String(t) => expand(t),
        Value::Array(ts) => ts
            .iter()
            .filter_map(Value::as_str)
            .flat_map(expand)
            .collect(),
        _ => Vec::new(),
    }
}

fn max_of(a: &Value, b: &Value) -> Value {
    if a.as_f64() >= b.as_f64() {
        a.clone()
    } else {
        b.clone()
    }
}

fn min_of(a: &Value, b: &Value) -> Value {
    if a.as_f64() <= b.as_f64() {
        a.clone()
    } else {
        b.clone()
    }
}

/// Bytes no finite value takes.
pub const INFINITE: u32 = u32::MAX / 4;

/// The fewest bytes of a value of each node: a fixpoint, since references make cycles.
fn min_bytes(nodes: &[Node]) -> Result<Vec<u32>, String> {
    let mut min = vec![INFINITE; nodes.len()];
    for _ in 0..=nodes.len() {
        let mut changed = false;
        for (i, node) in nodes.iter().enumerate() {
            let m = node_min(node, &min).min(INFINITE);
            if m < min[i] {
                min[i] = m;
                changed = true;
            }
        }
        if !changed {
            return Ok(min);
        }
    }
    Err("the schema's smallest values could not be worked out".into())
}

fn node_min(node: &Node, min: &[u32]) -> u32 {
    let at = |id: NodeId| min[id as usize];
    match node {
        Node::Any => 1,
        Node::Literals(lits) => lits
            .iter()
            .map(|l| l.len() as u32)
            .min()
            .unwrap_or(INFINITE),
        Node::AnyOf(ids) => ids.iter().map(|&i| at(i)).min().unwrap_or(INFINITE),
        Node::Typed(t) => {
            let mut best = INFINITE;
            if t.types & (T_NULL | T_BOOL) != 0 {
                best = 4;
            }
            if t.types & (T_INT | T_NUM) != 0 {
                best = best.min(numbers::shortest(&t.num).map_or(INFINITE, |w| w.len() as u32));
            }
            if t.types & T_STR != 0 {
                best = best.min(2 + t.min_len);
            }
            if t.types & T_ARR != 0 {
                let n = t.min_items;
                let item = if n == 0 {
                    0
                } else {
                    at(t.items).saturating_add(1).saturating_mul(n) - 1
                };
                best = best.min(2u32.saturating_add(item));
            }
            if t.types & T_OBJ != 0 {
                best = best.min(object_min(t, t.required, min));
            }
            best
        }
    }
}

/// The fewest bytes of the rest of an object whose properties `missing` are still required
/// (their keys, colons, values and commas) plus its `}`.
pub fn object_min(t: &Typed, missing: u64, min: &[u32]) -> u32 {
    let mut total: u32 = 2;
    let mut first = true;
    for (i, p) in t.props.iter().enumerate() {
        if missing >> i & 1 == 1 {
            let comma = u32::from(!first);
            first = false;
            total = total
                .saturating_add(comma + p.key.len() as u32 + 3)
                .saturating_add(min[p.node as usize]);
        }
    }
    total.min(INFINITE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn compile(schema: Value) -> Result<Grammar, String> {
        Grammar::compile(&crate::schema::check(schema).map_err(|e| e.message)?)
    }

    #[test]
    fn properties_are_sorted_by_their_keys_with_the_required_marked() {
        let g = compile(json!({
            "type": "object",
            "properties": {"b": {"type": "string"}, "a": {"type": "integer"}, "c\"": true},
            "required": ["b", "z"]
        }))
        .expect("compiles");
        let Node::Typed(t) = g.node(g.root) else {
            panic!("typed")
        };
        let keys: Vec<&[u8]> = t.props.iter().map(|p| p.key.as_slice()).collect();
        assert_eq!(keys, [&b"a"[..], b"b", b"c\\\"", b"z"]);
        assert_eq!(t.required, 0b1010);
        assert_eq!(t.additional, None);
        // {"b":"","z":0}
        assert_eq!(g.min(g.root), 14);
    }

    #[test]
    fn references_close_cycles_and_infinite_schemas_are_refused() {
        let tree = json!({
            "$defs": {"node": {"type": "object", "properties": {
                "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}
            }, "required": ["kids"]}},
            "$ref": "#/$defs/node"
        });
        let g = compile(tree).expect("compiles");
        assert_eq!(g.min(g.root), r#"{"kids":[]}"#.len() as u32);
        let endless = json!({
            "type": "object",
            "properties": {"next": {"$ref": "#"}},
            "required": ["next"]
        });
        assert!(compile(endless)
            .expect_err("infinite")
            .contains("no finite value"));
    }

    #[test]
    fn copies_of_merged_references_are_bounded() {
        // Each level references the one below twice, with a keyword beside the reference:
        // 2^30 copies if nothing stopped it.
        let mut defs = serde_json::Map::new();
        defs.insert("d0".into(), json!({"type": "integer"}));
        for k in 1..30 {
            let below = format!("#/$defs/d{}", k - 1);
            defs.insert(
                format!("d{k}"),
                json!({"type": "object", "properties": {
                    "a": {"$ref": below, "minimum": 0},
                    "b": {"$ref": below, "minimum": 1}
                }}),
            );
        }
        let schema = json!({"$defs": defs, "$ref": "#/$defs/d29"});
        let e = compile(schema).expect_err("too many copies");
        assert!(e.contains("more than 65536 rules"), "{e}");
    }

    #[test]
    fn enums_keep_the_values_their_siblings_allow() {
        let g = compile(json!({"type": "string", "enum": ["a", 1, "bb", null], "maxLength": 1}))
            .expect("compiles");
        assert_eq!(g.node(g.root), &Node::Literals(vec![b"\"a\"".to_vec()]));
        assert!(compile(json!({"type": "integer", "enum": ["a"]})).is_err());
    }

    #[test]
    fn any_of_beside_other_keywords_applies_both() {
        let g = compile(json!({
            "type": "object",
            "properties": {"x": {"type": "integer"}},
            "required": ["x"],
            "anyOf": [{"required": ["y"], "properties": {"y": {"type": "string"}}}, {"properties": {"x": {"minimum": 5}}}]
        }))
        .expect("compiles");
        let Node::AnyOf(branches) = g.node(g.root) else {
            panic!("anyOf")
        };
        assert_eq!(branches.len(), 2);
        // The branch without `y` has the smaller value, so it comes first.
        let Node::Typed(second) = g.node(branches[0]) else {
            panic!("typed")
        };
        let Node::Typed(x) = g.node(second.props[0].node) else {
            panic!("typed x")
        };
        assert_eq!(x.num.min, Some(5.0));
    }
}
