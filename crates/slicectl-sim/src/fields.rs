//! Partial responses: the `fields` system parameter every Google REST API
//! takes ("fields: FieldMask used for response filtering",
//! https://cloud.google.com/apis/docs/system-parameters), in the syntax
//! of Google's partial-response guides
//! (https://cloud.google.com/compute/docs/api/how-tos/performance#partial-response):
//! a comma-separated list of fields, `a/b` to select a field within a
//! field, `a(b,c)` to select several fields within one, `*` for every
//! field; a selection applies to every element of an array. The response keeps only what is
//! selected. A malformed selection is answered 400 `INVALID_ARGUMENT`
//! (Google: "Invalid field selection …").

use serde_json::{Map, Value};

use crate::errors::ApiError;

/// A parsed selection: each selected field, with what is selected within
/// it (empty: all of it).
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Selection(Vec<(String, Selection)>);

impl Selection {
    /// Parses a `fields` value.
    pub(crate) fn parse(s: &str) -> Result<Selection, ApiError> {
        let bad = || ApiError::invalid("invalidParameter", format!("Invalid field selection {s}"));
        let mut p = Parser {
            s: s.as_bytes(),
            at: 0,
        };
        let sel = p.list().ok_or_else(bad)?;
        if p.at != p.s.len() || sel.0.is_empty() {
            return Err(bad());
        }
        Ok(sel)
    }

    /// `v` with only the selected fields.
    pub(crate) fn apply(&self, v: Value) -> Value {
        if self.0.is_empty() {
            return v;
        }
        match v {
            Value::Array(items) => Value::Array(items.into_iter().map(|i| self.apply(i)).collect()),
            Value::Object(mut m) => {
                let mut out = Map::new();
                for (name, inner) in &self.0 {
                    if name == "*" {
                        // `*`: every field, each with what is selected in it.
                        for (k, x) in std::mem::take(&mut m) {
                            out.insert(k, inner.apply(x));
                        }
                    } else if let Some(x) = m.remove(name) {
                        out.insert(name.clone(), inner.apply(x));
                    }
                }
                Value::Object(out)
            }
            other => other,
        }
    }

    /// What [`Selection::apply`] makes of `v`, copying only what is
    /// selected: a producer that holds `v` (a stored record) hands out
    /// part of it without copying the rest first.
    pub(crate) fn select(&self, v: &Value) -> Value {
        if self.0.is_empty() {
            return v.clone();
        }
        match v {
            Value::Array(items) => Value::Array(items.iter().map(|i| self.select(i)).collect()),
            Value::Object(m) => {
                let mut out = Map::new();
                let mut taken = false;
                for (name, inner) in &self.0 {
                    if taken {
                        // `apply` took every field at the `*`.
                        break;
                    }
                    if name == "*" {
                        for (k, x) in m {
                            out.insert(k.clone(), inner.select(x));
                        }
                        taken = true;
                    } else if let Some(x) = m.get(name) {
                        out.insert(name.clone(), inner.select(x));
                    }
                }
                Value::Object(out)
            }
            other => other.clone(),
        }
    }

    /// Whether field `name` of an object survives the selection.
    pub(crate) fn keeps(&self, name: &str) -> bool {
        self.0.is_empty() || self.0.iter().any(|(n, _)| n == name || n == "*")
    }

    /// What is selected within field `name`, when only part of it is:
    /// `None` when all of it may be (nothing selected, `name` selected
    /// whole, or `*`). For a producer that leaves out what the selection
    /// would drop anyway; the selection is still applied to what it makes.
    pub(crate) fn within(&self, name: &str) -> Option<&Selection> {
        if self.0.iter().any(|(n, _)| n == "*") {
            return None;
        }
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, inner)| inner)
            .filter(|inner| !inner.0.is_empty())
    }

    /// Folds `path` (`a/b/c`) with its sub-selection into this selection.
    fn push(&mut self, path: Vec<String>, inner: Selection) {
        let mut it = path.into_iter().rev();
        let Some(last) = it.next() else { return };
        let mut sel = (last, inner);
        for name in it {
            sel = (name, Selection(vec![sel]));
        }
        self.merge(sel.0, sel.1);
    }

    /// Adds `name` with what is selected in it; `a/b` and `a(c)` both
    /// select within `a`, and select `b` and `c` there. A field selected
    /// whole stays whole.
    fn merge(&mut self, name: String, inner: Selection) {
        match self.0.iter_mut().find(|(n, _)| *n == name) {
            None => self.0.push((name, inner)),
            Some((_, have)) if have.0.is_empty() => {}
            Some((_, have)) if inner.0.is_empty() => *have = inner,
            Some((_, have)) => {
                for (n, i) in inner.0 {
                    have.merge(n, i);
                }
            }
        }
    }
}

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    /// `item (',' item)*`
    fn list(&mut self) -> Option<Selection> {
        let mut sel = Selection::default();
        loop {
            let path = self.path()?;
            let inner = if self.eat(b'(') {
                let inner = self.list()?;
                if !self.eat(b')') {
                    return None;
                }
                inner
            } else {
                Selection::default()
            };
            sel.push(path, inner);
            if !self.eat(b',') {
                return Some(sel);
            }
        }
    }

    /// `name ('/' name)*`
    fn path(&mut self) -> Option<Vec<String>> {
        let mut out = vec![self.name()?];
        while self.eat(b'/') {
            out.push(self.name()?);
        }
        Some(out)
    }

    fn name(&mut self) -> Option<String> {
        while self.eat(b' ') {}
        let start = self.at;
        while self
            .s
            .get(self.at)
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'*')
        {
            self.at += 1;
        }
        let name = std::str::from_utf8(&self.s[start..self.at]).ok()?;
        while self.eat(b' ') {}
        (!name.is_empty()).then(|| name.to_string())
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.s.get(self.at) == Some(&c) {
            self.at += 1;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
#[path = "fields/tests.rs"]
mod tests;
