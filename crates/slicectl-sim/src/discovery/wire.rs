//! Wire-type conformance: walks the JSON schema of one of our serde types
//! (as `schemars` derives it, honouring `rename`/`rename_all`/`with`) side by
//! side with a discovery schema, and reports every property whose JSON name is
//! not in the discovery schema or whose JSON type is not compatible with it.
//!
//! Our wire types read with `#[serde(default)]`, so a misspelt field name would
//! otherwise read as absent; `tests/integration/wire_types_discovery.rs` runs this over
//! every type in `crate::resource`.
//!
//! Compatible means serde can read what Google sends: string ↔ string (any
//! format, so int64/uint64 strings read into a `String`), integer ↔ integer
//! when our range holds Google's, number ↔ number or integer, boolean ↔
//! boolean, struct ↔ object schema (property by property), `Vec` ↔ array (item
//! by item), map ↔ `additionalProperties` (value by value), a Rust string enum
//! ↔ a discovery string whose `enum` has every variant. An integer against
//! Google's int64-as-string is a mismatch: declare the field's wire type with
//! `#[serde(with = "int64_string")] #[schemars(with = "String")]`. A schema
//! shape the walk does not understand is reported, never skipped.

use std::collections::{BTreeSet, HashSet};

use serde_json::{Map, Value};

use super::Discovery;

/// The outcome of [`Discovery::check_wire_type`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WireCheck {
    /// One line per mismatch: `NodePool.config.machneType: not in container v1 NodeConfig`.
    pub mismatches: Vec<String>,
    /// The Rust types the walk went through (schemars titles and `$defs` names).
    pub rust_types: BTreeSet<String>,
    /// Every path found in the discovery schema with a compatible type.
    pub checked: BTreeSet<String>,
}

/// The JSON shape of one side, reduced to what compatibility depends on.
#[derive(Debug, Clone)]
enum Shape<'a> {
    Any,
    Object(&'a Map<String, Value>),
    Map(&'a Value),
    Array(&'a Value),
    /// Format (`int64`, `google-duration`, …) and enum values.
    String(Option<&'a str>, Option<Vec<&'a str>>),
    Integer(Option<&'a str>),
    Number,
    Boolean,
    Unsupported(String),
}

impl Shape<'_> {
    fn describe(&self) -> String {
        match self {
            Shape::Any => "any".into(),
            Shape::Object(_) => "object".into(),
            Shape::Map(_) => "map (additionalProperties)".into(),
            Shape::Array(_) => "array".into(),
            Shape::String(Some(f), _) => format!("string ({f})"),
            Shape::String(None, Some(_)) => "string (enum)".into(),
            Shape::String(None, None) => "string".into(),
            Shape::Integer(Some(f)) => format!("integer ({f})"),
            Shape::Integer(None) => "integer".into(),
            Shape::Number => "number".into(),
            Shape::Boolean => "boolean".into(),
            Shape::Unsupported(why) => why.clone(),
        }
    }
}

/// Range of an integer `format` (schemars and discovery spellings).
fn int_range(format: Option<&str>) -> Option<(i128, i128)> {
    Some(match format? {
        "int8" => (i8::MIN.into(), i8::MAX.into()),
        "int16" => (i16::MIN.into(), i16::MAX.into()),
        "int32" => (i32::MIN.into(), i32::MAX.into()),
        "int64" | "int" => (i64::MIN.into(), i64::MAX.into()),
        "uint8" => (0, u8::MAX.into()),
        "uint16" => (0, u16::MAX.into()),
        "uint32" => (0, u32::MAX.into()),
        "uint64" | "uint" => (0, u64::MAX.into()),
        _ => return None,
    })
}

/// The schema that accepts anything.
static ANY: Value = Value::Bool(true);

fn str_values(v: &Value) -> Option<Vec<&str>> {
    v.as_array()?.iter().map(Value::as_str).collect()
}

struct Walker<'a> {
    doc: &'a Discovery,
    api: String,
    defs: Option<&'a Map<String, Value>>,
    seen: HashSet<(String, String)>,
    out: WireCheck,
}

impl<'a> Walker<'a> {
    fn mismatch(&mut self, line: String) {
        self.out.mismatches.push(line);
    }

    /// Resolves `$ref`s and `Option`'s null alternative; returns the Rust
    /// type name (from `$defs`) if one was crossed.
    fn rust_shape(
        &self,
        node: &'a Value,
        mut def: Option<&'a str>,
    ) -> (Option<&'a str>, Shape<'a>) {
        let mut node = node;
        let mut depth = 0;
        let obj = loop {
            depth += 1;
            if depth > 32 {
                return (def, Shape::Unsupported("a $ref cycle".into()));
            }
            let Some(obj) = node.as_object() else {
                return match node.as_bool() {
                    Some(true) => (def, Shape::Any),
                    _ => (def, Shape::Unsupported("a `false` schema".into())),
                };
            };
            if let Some(r) = obj.get("$ref").and_then(Value::as_str) {
                let name = r.strip_prefix("#/$defs/").unwrap_or(r);
                match self.defs.and_then(|d| d.get(name)) {
                    Some(target) => {
                        def = Some(name);
                        node = target;
                        continue;
                    }
                    None => return (def, Shape::Unsupported(format!("unresolved $ref {r}"))),
                }
            }
            for key in ["anyOf", "oneOf"] {
                if let Some(alts) = obj.get(key).and_then(Value::as_array) {
                    let non_null: Vec<&Value> = alts
                        .iter()
                        .filter(|a| a.get("type").and_then(Value::as_str) != Some("null"))
                        .collect();
                    if let Some(values) = non_null
                        .iter()
                        .map(|a| a.get("const").and_then(Value::as_str))
                        .collect::<Option<Vec<&str>>>()
                        .filter(|v| !v.is_empty())
                    {
                        return (def, Shape::String(None, Some(values)));
                    }
                    return match non_null.as_slice() {
                        [one] => self.rust_shape(one, def),
                        _ => (def, Shape::Unsupported(format!("an untagged {key}"))),
                    };
                }
            }
            break obj;
        };
        let types: Vec<&str> = match obj.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| *t != "null")
                .collect(),
            _ => Vec::new(),
        };
        let format = obj.get("format").and_then(Value::as_str);
        let shape = match types.as_slice() {
            [] if obj.get("enum").is_some() || obj.get("const").is_some() => {
                let values = obj
                    .get("enum")
                    .and_then(str_values)
                    .or_else(|| obj.get("const").and_then(Value::as_str).map(|c| vec![c]));
                match values {
                    Some(v) => Shape::String(None, Some(v)),
                    None => Shape::Unsupported("a non-string enum".into()),
                }
            }
            [] if ["allOf", "not", "if", "properties", "items"]
                .iter()
                .any(|k| obj.contains_key(*k)) =>
            {
                Shape::Unsupported("an untyped composite schema".into())
            }
            [] => Shape::Any,
            ["string"] => Shape::String(format, obj.get("enum").and_then(str_values)),
            ["integer"] => Shape::Integer(format),
            ["number"] => Shape::Number,
            ["boolean"] => Shape::Boolean,
            ["array"] => match obj.get("items") {
                Some(items) => Shape::Array(items),
                None => Shape::Unsupported("an array without items".into()),
            },
            ["object"] => match (obj.get("properties"), obj.get("additionalProperties")) {
                (Some(Value::Object(props)), _) => Shape::Object(props),
                (None, Some(ap @ Value::Object(_))) => Shape::Map(ap),
                (None, Some(Value::Bool(true)) | None) => Shape::Map(&ANY),
                _ => Shape::Unsupported("an object schema".into()),
            },
            many => Shape::Unsupported(format!("one of several types {many:?}")),
        };
        (def, shape)
    }

    /// Resolves a discovery `$ref`; returns the label of the object it names
    /// (the schema id, or `where` for an inline object).
    fn discovery_shape(&self, node: &'a Value, at: &str) -> (String, Shape<'a>) {
        let (label, node) = match node.get("$ref").and_then(Value::as_str) {
            Some(id) => match self.doc.schema(id) {
                Some(s) => (id.to_string(), s),
                None => {
                    let why = format!("$ref {id} missing from {}", self.api);
                    return (id.to_string(), Shape::Unsupported(why));
                }
            },
            None => (at.to_string(), node),
        };
        let format = node.get("format").and_then(Value::as_str);
        let shape = match node.get("type").and_then(Value::as_str) {
            None | Some("any") => match node.get("properties") {
                Some(Value::Object(props)) => Shape::Object(props),
                _ => Shape::Any,
            },
            Some("string") => Shape::String(format, node.get("enum").and_then(str_values)),
            Some("integer") => Shape::Integer(Some(format.unwrap_or("int32"))),
            Some("number") => Shape::Number,
            Some("boolean") => Shape::Boolean,
            Some("array") => match node.get("items") {
                Some(items) => Shape::Array(items),
                None => Shape::Any,
            },
            Some("object") => match (node.get("properties"), node.get("additionalProperties")) {
                (Some(Value::Object(props)), _) => Shape::Object(props),
                (_, Some(ap)) => Shape::Map(ap),
                _ => Shape::Any,
            },
            Some(other) => Shape::Unsupported(format!("discovery type {other}")),
        };
        (label, shape)
    }

    /// Checks one value: `path` is ours (`NodePool.config`), `at` is
    /// discovery's (`NodePool.config`, or `NodeConfig.labels` further down).
    fn value(&mut self, path: &str, rust: &'a Value, disc: &'a Value, at: &str) {
        let (def, ours) = self.rust_shape(rust, None);
        let (label, theirs) = self.discovery_shape(disc, at);
        if let Some(def) = def {
            self.out.rust_types.insert(def.to_string());
            if !self.seen.insert((def.to_string(), label.clone())) {
                return;
            }
        }
        let incompatible = |w: &mut Self, hint: &str| {
            let line = format!(
                "{path}: ours is {}, {} {at} is {}{hint}",
                ours.describe(),
                w.api,
                theirs.describe()
            );
            w.mismatch(line);
        };
        match (&ours, &theirs) {
            (Shape::Unsupported(why), _) => {
                let line = format!("{path}: cannot check our schema ({why})");
                self.mismatch(line);
            }
            (_, Shape::Unsupported(why)) => {
                let line = format!("{path}: cannot check {} {at} ({why})", self.api);
                self.mismatch(line);
            }
            (Shape::Any, _) | (_, Shape::Any) => {}
            (Shape::Object(props), Shape::Object(dprops)) => {
                self.object(path, props, &label, dprops);
            }
            (Shape::Map(v), Shape::Map(dv)) => {
                self.value(&format!("{path}{{}}"), v, dv, &format!("{at}{{}}"));
            }
            (Shape::Array(i), Shape::Array(di)) => {
                self.value(&format!("{path}[]"), i, di, &format!("{at}[]"));
            }
            (Shape::String(_, ours_enum), Shape::String(_, theirs_enum)) => {
                if let (Some(ours_enum), Some(theirs_enum)) = (ours_enum, theirs_enum) {
                    for v in ours_enum {
                        if !theirs_enum.contains(v) {
                            let line = format!("{path}: enum value {v:?} not in {} {at}", self.api);
                            self.mismatch(line);
                        }
                    }
                }
            }
            (Shape::Integer(f), Shape::Integer(df)) => match (int_range(*f), int_range(*df)) {
                (Some((lo, hi)), Some((dlo, dhi))) if lo <= dlo && dhi <= hi => {}
                _ => incompatible(self, " (our range does not hold theirs)"),
            },
            (Shape::Integer(_), Shape::String(Some("int64" | "uint64"), _)) => incompatible(
                self,
                " (64-bit integers travel as JSON strings: \
                 #[serde(with = \"int64_string\")] #[schemars(with = \"String\")])",
            ),
            (Shape::Number, Shape::Number | Shape::Integer(_))
            | (Shape::Boolean, Shape::Boolean) => {}
            _ => incompatible(self, ""),
        }
    }

    fn object(
        &mut self,
        path: &str,
        props: &'a Map<String, Value>,
        label: &str,
        dprops: &'a Map<String, Value>,
    ) {
        for (name, prop) in props {
            let child = format!("{path}.{name}");
            match dprops.get(name) {
                Some(dprop) => {
                    let before = self.out.mismatches.len();
                    self.value(&child, prop, dprop, &format!("{label}.{name}"));
                    if self.out.mismatches.len() == before {
                        self.out.checked.insert(child);
                    }
                }
                None => {
                    let line = format!("{child}: not in {} {label}", self.api);
                    self.mismatch(line);
                }
            }
        }
    }
}

impl Discovery {
    /// `container v1`, `compute v1` (from the document's `name` and `version`).
    pub fn api_name(&self) -> String {
        let field = |k: &str| self.doc.get(k).and_then(Value::as_str).unwrap_or("?");
        format!("{} {}", field("name"), field("version"))
    }

    /// Checks our serde type's JSON schema (`schemars::schema_for!(T)`, as a
    /// value) against discovery schema `schema_id`: every property must exist
    /// under the same JSON name with a compatible JSON type, recursively.
    pub fn check_wire_type(&self, schema_id: &str, rust: &Value) -> WireCheck {
        let root = rust
            .get("title")
            .and_then(Value::as_str)
            .unwrap_or(schema_id)
            .to_string();
        let mut w = Walker {
            doc: self,
            api: self.api_name(),
            defs: rust.get("$defs").and_then(Value::as_object),
            seen: HashSet::new(),
            out: WireCheck::default(),
        };
        w.out.rust_types.insert(root.clone());
        match self.schema(schema_id) {
            // Without a `$ref`, the walk labels the object by `at`: the id.
            Some(disc) => w.value(&root, rust, disc, schema_id),
            None => {
                let line = format!("{root}: no schema {schema_id} in {}", w.api);
                w.mismatch(line);
            }
        }
        w.out
    }
}
