//! A thin walk over toml's spanned document that remembers the key path, so
//! that every error names the file, the line and the dotted key.

use std::ops::Range;
use std::time::Duration;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use crate::error::Error;

/// The source text and its name, for turning byte offsets into lines.
pub struct Doc<'s> {
    pub file: &'s str,
    pub src: &'s str,
}

impl Doc<'_> {
    /// 1-based line of a byte offset.
    pub fn line(&self, offset: usize) -> usize {
        let end = offset.min(self.src.len());
        self.src.as_bytes()[..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }

    pub fn error(&self, span: &Range<usize>, key: &str, message: impl Into<String>) -> Error {
        Error {
            file: self.file.to_string(),
            line: Some(self.line(span.start)),
            key: key.to_string(),
            message: message.into(),
        }
    }
}

/// A value and where it sits: its key path and span.
#[derive(Clone)]
pub struct Node<'a, 's> {
    pub doc: &'a Doc<'s>,
    pub value: &'a Spanned<DeValue<'s>>,
    path: String,
}

/// A table and where it sits.
pub struct Table<'a, 's> {
    pub doc: &'a Doc<'s>,
    table: &'a DeTable<'s>,
    span: Range<usize>,
    pub path: String,
}

impl<'a, 's> Table<'a, 's> {
    pub fn root(doc: &'a Doc<'s>, table: &'a Spanned<DeTable<'s>>) -> Self {
        Table {
            doc,
            table: table.get_ref(),
            span: table.span(),
            path: String::new(),
        }
    }

    /// The dotted path of a key in this table.
    pub fn key_path(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// Refuses keys outside `allowed` (a typo would otherwise be ignored).
    pub fn only(&self, allowed: &[&str]) -> Result<(), Error> {
        for (key, _) in self.table.iter() {
            if !allowed.contains(&key.get_ref().as_ref()) {
                return Err(self.doc.error(
                    &key.span(),
                    &self.key_path(key.get_ref()),
                    format!("unknown key; expected one of: {}", allowed.join(", ")),
                ));
            }
        }
        Ok(())
    }

    /// The value at `key`, with its path.
    pub fn get(&self, key: &str) -> Option<Node<'a, 's>> {
        let (_, value) = self.table.iter().find(|(k, _)| k.get_ref() == key)?;
        Some(Node {
            doc: self.doc,
            value,
            path: self.key_path(key),
        })
    }

    /// Every entry in file order, as (key, node).
    pub fn entries(&self) -> Vec<(String, Node<'a, 's>)> {
        self.table
            .iter()
            .map(|(k, v)| {
                let node = Node {
                    doc: self.doc,
                    value: v,
                    path: self.key_path(k.get_ref()),
                };
                (k.get_ref().to_string(), node)
            })
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// An error about the table as a whole (a key that is missing).
    pub fn error(&self, key: &str, message: impl Into<String>) -> Error {
        self.doc.error(&self.span, &self.key_path(key), message)
    }
}

impl<'a, 's> Node<'a, 's> {
    /// The `i`th element of an array node.
    pub fn item(&self, i: usize, value: &'a Spanned<DeValue<'s>>) -> Node<'a, 's> {
        Node {
            doc: self.doc,
            value,
            path: format!("{}[{i}]", self.path),
        }
    }

    pub fn error(&self, message: impl Into<String>) -> Error {
        self.doc.error(&self.value.span(), &self.path, message)
    }

    pub fn table(&self) -> Result<Table<'a, 's>, Error> {
        match self.value.get_ref() {
            DeValue::Table(t) => Ok(Table {
                doc: self.doc,
                table: t,
                span: self.value.span(),
                path: self.path.clone(),
            }),
            _ => Err(self.error("expected a table")),
        }
    }

    pub fn is_table(&self) -> bool {
        matches!(self.value.get_ref(), DeValue::Table(_))
    }

    pub fn str(&self) -> Result<&'a str, Error> {
        match self.value.get_ref() {
            DeValue::String(s) => Ok(s.as_ref()),
            _ => Err(self.error("expected a string")),
        }
    }

    pub fn array(&self) -> Result<Vec<Node<'a, 's>>, Error> {
        match self.value.get_ref() {
            DeValue::Array(a) => Ok(a.iter().enumerate().map(|(i, v)| self.item(i, v)).collect()),
            _ => Err(self.error("expected an array")),
        }
    }

    /// A non-negative integer.
    pub fn u64(&self) -> Result<u64, Error> {
        match self.value.get_ref() {
            DeValue::Integer(i) => u64::from_str_radix(i.as_str(), i.radix())
                .map_err(|_| self.error("expected a non-negative integer")),
            _ => Err(self.error("expected a non-negative integer")),
        }
    }

    /// Any number, integer or float.
    pub fn number(&self) -> Option<f64> {
        match self.value.get_ref() {
            DeValue::Integer(i) => i64::from_str_radix(i.as_str(), i.radix())
                .ok()
                .map(|v| v as f64),
            DeValue::Float(f) => f.as_str().parse::<f64>().ok(),
            _ => None,
        }
    }

    /// A finite number above zero.
    pub fn positive(&self) -> Result<f64, Error> {
        match self.number() {
            Some(v) if v.is_finite() && v > 0.0 => Ok(v),
            _ => Err(self.error("expected a positive number")),
        }
    }

    /// A duration string such as `"100ms"`.
    pub fn duration(&self) -> Result<Duration, Error> {
        let text = match self.value.get_ref() {
            DeValue::String(s) => s.as_ref(),
            _ => return Err(self.error("expected a duration string such as \"100ms\"")),
        };
        xload_sys::duration::parse_duration(text).map_err(|e| self.error(e.to_string()))
    }
}
