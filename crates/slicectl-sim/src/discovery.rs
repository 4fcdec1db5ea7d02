//! Google discovery documents, embedded, and a request-body validator that
//! walks a JSON body against a discovery schema the way Google's JSON→proto
//! transcoder does: unknown fields, wrong JSON types and bad enum values are
//! rejected with Google's messages; proto enum numbers are accepted where the
//! API accepts them (GKE); the body is returned normalised (enums as names,
//! int64 as strings, int32 as numbers, nulls dropped).

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::{Map, Value};

mod wire;
pub use wire::WireCheck;

/// The container v1 discovery document (verbatim copy).
const CONTAINER_V1: &str = include_str!("discovery/container-v1.json");
/// The compute v1 discovery document, pruned by `scripts/prune-discovery.py`.
pub const COMPUTE_V1_PRUNED: &str = include_str!("discovery/compute-v1-pruned.json");
/// The Cloud Quotas v1 methods slicectl reads (`quotaInfos.get`, `.list`),
/// in discovery form. Google's client libraries ship no document for this
/// API, so it is derived from the API's protos in googleapis/googleapis
/// (`google/api/cloudquotas/v1/cloudquotas.proto`, `resources.proto`): its
/// `description` names the commit.
pub const CLOUDQUOTAS_V1: &str = include_str!("discovery/cloudquotas-v1.json");
/// The subset of Cloud Monitoring v3 slicectl reads (`timeSeries.list`),
/// derived from the Cloud SDK's generated client (its `description` says
/// how): the quota usage the simulator serves follows it.
pub const MONITORING_V3: &str = include_str!("discovery/monitoring-v3.json");

/// One field-level violation (also used for `google.rpc.BadRequest`).
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    /// Proto field path, e.g. `node_pool.config.spot`.
    pub field: String,
    /// Google's message for it.
    pub message: String,
}

/// A parsed discovery document with a method index.
#[derive(Debug)]
pub struct Discovery {
    doc: Value,
    methods: HashMap<String, Value>,
    /// Proto package used in enum/message type names.
    proto_package: &'static str,
    /// Whether enum fields also accept their proto numbers.
    int_enums: bool,
}

fn index_methods(node: &Value, out: &mut HashMap<String, Value>) {
    if let Some(methods) = node.get("methods").and_then(Value::as_object) {
        for m in methods.values() {
            if let Some(id) = m.get("id").and_then(Value::as_str) {
                out.insert(id.to_string(), m.clone());
            }
        }
    }
    if let Some(res) = node.get("resources").and_then(Value::as_object) {
        for r in res.values() {
            index_methods(r, out);
        }
    }
}

impl Discovery {
    fn parse(text: &str, proto_package: &'static str, int_enums: bool) -> Result<Self, String> {
        let doc: Value =
            serde_json::from_str(text).map_err(|e| format!("discovery document: {e}"))?;
        let mut methods = HashMap::new();
        index_methods(&doc, &mut methods);
        Ok(Self {
            doc,
            methods,
            proto_package,
            int_enums,
        })
    }

    /// The method with this discovery id (e.g. `compute.resourcePolicies.insert`).
    pub fn method(&self, id: &str) -> Option<&Value> {
        self.methods.get(id)
    }

    /// All method ids in the document.
    pub fn method_ids(&self) -> impl Iterator<Item = &str> {
        self.methods.keys().map(String::as_str)
    }

    /// The request-body schema name of a method, if it takes a body.
    pub fn request_schema(&self, id: &str) -> Option<&str> {
        self.method(id)?.get("request")?.get("$ref")?.as_str()
    }

    /// The response-body schema name of a method.
    pub fn response_schema(&self, id: &str) -> Option<&str> {
        self.method(id)?.get("response")?.get("$ref")?.as_str()
    }

    /// The document's `revision`.
    pub fn revision(&self) -> &str {
        self.doc
            .get("revision")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// The schema with this id (e.g. `NodePool`), as the document spells it.
    pub fn schema(&self, name: &str) -> Option<&Value> {
        self.doc.get("schemas")?.get(name)
    }

    /// Validates `body` against schema `schema`; `root` is the proto path of
    /// the body (empty for GKE, `resource_policy_resource` for compute
    /// inserts). Returns the normalised body or every violation.
    pub fn validate(
        &self,
        schema: &str,
        root: &str,
        body: &Value,
    ) -> Result<Value, Vec<Violation>> {
        let mut errs = Vec::new();
        let out = self.walk_ref(schema, body, root, &mut errs);
        if errs.is_empty() { Ok(out) } else { Err(errs) }
    }

    fn walk_ref(&self, name: &str, v: &Value, path: &str, errs: &mut Vec<Violation>) -> Value {
        match self.schema(name) {
            Some(s) => self.walk_object(s, name, v, path, errs),
            None => v.clone(),
        }
    }

    fn walk_object(
        &self,
        schema: &Value,
        owner: &str,
        v: &Value,
        path: &str,
        errs: &mut Vec<Violation>,
    ) -> Value {
        let Some(obj) = v.as_object() else {
            errs.push(bad_value(
                path,
                &format!("type.googleapis.com/{}.{owner}", self.proto_package),
                v,
            ));
            return Value::Null;
        };
        let empty = Map::new();
        let props = schema
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let mut out = Map::new();
        for (k, val) in obj {
            let found = props
                .get_key_value(k.as_str())
                .or_else(|| props.iter().find(|(name, _)| snake(name) == *k));
            let Some((name, prop)) = found else {
                let at = if path.is_empty() {
                    String::new()
                } else {
                    format!(" at '{path}'")
                };
                errs.push(Violation {
                    field: path.to_string(),
                    message: format!(
                        "Invalid JSON payload received. Unknown name \"{k}\"{at}: Cannot find field."
                    ),
                });
                continue;
            };
            if val.is_null() {
                continue;
            }
            let child = join(path, &snake(name));
            let norm = self.walk_prop(prop, owner, name, val, &child, errs);
            if !norm.is_null() {
                out.insert(name.clone(), norm);
            }
        }
        Value::Object(out)
    }

    fn walk_prop(
        &self,
        prop: &Value,
        owner: &str,
        field: &str,
        v: &Value,
        path: &str,
        errs: &mut Vec<Violation>,
    ) -> Value {
        if let Some(r) = prop.get("$ref").and_then(Value::as_str) {
            return self.walk_ref(r, v, path, errs);
        }
        match prop.get("type").and_then(Value::as_str).unwrap_or("any") {
            "object" => {
                if let Some(ap) = prop.get("additionalProperties") {
                    let Some(m) = v.as_object() else {
                        errs.push(bad_value(path, "TYPE_MESSAGE", v));
                        return Value::Null;
                    };
                    let mut out = Map::new();
                    for (k, item) in m {
                        let child = format!("{path}[{k}]");
                        let norm = self.walk_prop(ap, owner, field, item, &child, errs);
                        out.insert(k.clone(), norm);
                    }
                    Value::Object(out)
                } else if prop.get("properties").is_some() {
                    let inner = format!("{owner}.{}", upper_camel(field));
                    self.walk_object(prop, &inner, v, path, errs)
                } else {
                    v.clone()
                }
            }
            "array" => {
                let Some(items) = v.as_array() else {
                    errs.push(bad_value(path, &scalar_type_name(prop), v));
                    return Value::Null;
                };
                let item_schema = prop.get("items").cloned().unwrap_or(Value::Null);
                let out = items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| {
                        let child = format!("{path}[{i}]");
                        self.walk_prop(&item_schema, owner, field, item, &child, errs)
                    })
                    .collect();
                Value::Array(out)
            }
            "string" => self.walk_string(prop, owner, field, v, path, errs),
            "integer" => walk_integer(prop, v, path, errs),
            "number" => match v {
                Value::Number(_) => v.clone(),
                Value::String(s) if s.parse::<f64>().is_ok() => {
                    s.parse::<f64>().map(Value::from).unwrap_or(Value::Null)
                }
                _ => {
                    errs.push(bad_value(path, "TYPE_DOUBLE", v));
                    Value::Null
                }
            },
            "boolean" => {
                if v.is_boolean() {
                    v.clone()
                } else {
                    errs.push(bad_value(path, "TYPE_BOOL", v));
                    Value::Null
                }
            }
            _ => v.clone(),
        }
    }

    fn walk_string(
        &self,
        prop: &Value,
        owner: &str,
        field: &str,
        v: &Value,
        path: &str,
        errs: &mut Vec<Violation>,
    ) -> Value {
        if let Some(values) = prop.get("enum").and_then(Value::as_array) {
            let type_name = format!(
                "type.googleapis.com/{}.{owner}.{}",
                self.proto_package,
                upper_camel(field)
            );
            match v {
                Value::String(s) if values.iter().any(|e| e.as_str() == Some(s)) => {
                    return v.clone();
                }
                Value::Number(n) if self.int_enums => {
                    if let Some(name) = n
                        .as_u64()
                        .and_then(|i| usize::try_from(i).ok())
                        .and_then(|i| values.get(i))
                    {
                        return name.clone();
                    }
                }
                _ => {}
            }
            errs.push(bad_value(path, &type_name, v));
            return Value::Null;
        }
        match prop.get("format").and_then(Value::as_str) {
            Some(f @ ("int64" | "uint64")) => {
                let ok = match v {
                    Value::String(s) => int_in_range(s, f),
                    Value::Number(n) => n.is_i64() || n.is_u64(),
                    _ => false,
                };
                if ok {
                    match v {
                        Value::Number(n) => Value::String(n.to_string()),
                        _ => v.clone(),
                    }
                } else {
                    let t = if f == "int64" {
                        "TYPE_INT64"
                    } else {
                        "TYPE_UINT64"
                    };
                    errs.push(bad_value(path, t, v));
                    Value::Null
                }
            }
            _ => {
                if v.is_string() {
                    v.clone()
                } else {
                    errs.push(bad_value(path, "TYPE_STRING", v));
                    Value::Null
                }
            }
        }
    }
}

fn int_in_range(s: &str, format: &str) -> bool {
    match format {
        "int64" => s.parse::<i64>().is_ok(),
        "uint64" => s.parse::<u64>().is_ok(),
        "int32" => s.parse::<i32>().is_ok(),
        _ => s.parse::<u32>().is_ok(),
    }
}

fn walk_integer(prop: &Value, v: &Value, path: &str, errs: &mut Vec<Violation>) -> Value {
    let format = prop
        .get("format")
        .and_then(Value::as_str)
        .unwrap_or("int32");
    let parsed = match v {
        Value::Number(n) => n.as_i64().filter(|i| int_in_range(&i.to_string(), format)),
        Value::String(s) if int_in_range(s, format) => s.parse::<i64>().ok(),
        _ => None,
    };
    match parsed {
        Some(i) => Value::from(i),
        None => {
            let t = if format == "uint32" {
                "TYPE_UINT32"
            } else {
                "TYPE_INT32"
            };
            errs.push(bad_value(path, t, v));
            Value::Null
        }
    }
}

fn scalar_type_name(prop: &Value) -> String {
    let items = prop.get("items").unwrap_or(&Value::Null);
    match items.get("type").and_then(Value::as_str) {
        Some("string") => "TYPE_STRING".into(),
        Some("boolean") => "TYPE_BOOL".into(),
        Some("integer") => "TYPE_INT32".into(),
        Some("number") => "TYPE_DOUBLE".into(),
        _ => "TYPE_MESSAGE".into(),
    }
}

fn bad_value(path: &str, type_name: &str, v: &Value) -> Violation {
    Violation {
        field: path.to_string(),
        message: format!("Invalid value at '{path}' ({type_name}), {v}"),
    }
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

/// `nodePool` → `node_pool` (proto field names in error paths).
pub fn snake(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

fn upper_camel(name: &str) -> String {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) => c.to_ascii_uppercase().to_string() + chars.as_str(),
        None => String::new(),
    }
}

static CONTAINER: OnceLock<Result<Discovery, String>> = OnceLock::new();
static COMPUTE: OnceLock<Result<Discovery, String>> = OnceLock::new();
static CLOUDQUOTAS: OnceLock<Result<Discovery, String>> = OnceLock::new();
static MONITORING: OnceLock<Result<Discovery, String>> = OnceLock::new();

/// The embedded container v1 document (enums accept proto numbers).
pub fn container() -> Result<&'static Discovery, String> {
    CONTAINER
        .get_or_init(|| Discovery::parse(CONTAINER_V1, "google.container.v1", true))
        .as_ref()
        .map_err(Clone::clone)
}

/// The embedded, pruned compute v1 document.
pub fn compute() -> Result<&'static Discovery, String> {
    COMPUTE
        .get_or_init(|| Discovery::parse(COMPUTE_V1_PRUNED, "google.cloud.compute.v1", false))
        .as_ref()
        .map_err(Clone::clone)
}

/// The embedded Cloud Quotas v1 document (its methods take no body: it
/// gives the methods' ids and parameters and the response schemas).
pub fn cloudquotas() -> Result<&'static Discovery, String> {
    CLOUDQUOTAS
        .get_or_init(|| Discovery::parse(CLOUDQUOTAS_V1, "google.api.cloudquotas.v1", true))
        .as_ref()
        .map_err(Clone::clone)
}

/// The embedded Cloud Monitoring v3 subset ([`MONITORING_V3`]).
pub fn monitoring() -> Result<&'static Discovery, String> {
    MONITORING
        .get_or_init(|| Discovery::parse(MONITORING_V3, "google.monitoring.v3", true))
        .as_ref()
        .map_err(Clone::clone)
}

#[cfg(test)]
#[path = "discovery/tests.rs"]
mod tests;
