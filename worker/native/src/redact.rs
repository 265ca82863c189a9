//! spec.columns on rendered values: each ruled column's value in its ruled form (left out, hashed,
//! truncated, masked), and the primary key with its hashed columns hashed.
//!
//! The renderers apply a table's `Rules` column by column as they write each row (`Layout`), so a ruled
//! value never exists in their output; `Redactor.objects`/`keys` apply the same functions to rendered
//! text (the property tests' entry). Values are the JSON text every decode path renders (Jackson's
//! escapes); `mysqlcapture_worker.column_rules` is the reference they match byte for byte.

use blake2::digest::{Update, VariableOutput};
use blake2::Blake2bVar;
use hmac::{Hmac, Mac};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use sha2::{Sha256, Sha512};
use std::sync::Arc;

// Rule kinds (mirrored by mysqlcapture_worker.column_rules).
const EXCLUDE: u8 = 0;
const HASH: u8 = 1;
const MASK: u8 = 2;
const TRUNCATE: u8 = 3;

type Fail = &'static str;

struct ColumnRule {
    key: Vec<u8>, // the column name as a JSON string token, quotes included
    kind: u8,
    n: usize,
    with: Vec<u8>, // mask's character, escaped
    binary: bool,
}

/// One table's rules, shared by its renderers (`Layout`) and its `Redactor`.
pub(crate) struct Rules {
    columns: Vec<ColumnRule>,
    key_columns: Vec<Option<bool>>, // per primary-key column: hashed (Some(binary)) or kept (None)
    // Keyed once: each value's HMAC starts from a copy of these (the key's inner and outer pads hashed already).
    mac256: Hmac<Sha256>,
    mac512: Option<Hmac<Sha512>>,
    hash_prefix: Vec<u8>,
}

/// A table's column rules as Python holds them (`column_rules.TableRules.native`).
#[pyclass(frozen)]
pub struct Redactor {
    pub(crate) rules: Arc<Rules>,
}

/// The index after the JSON string starting at `i` (a quote).
fn skip_string(b: &[u8], mut i: usize) -> Result<usize, Fail> {
    i += 1;
    loop {
        match b.get(i) {
            Some(b'\\') => i += 2,
            Some(b'"') => return Ok(i + 1),
            Some(_) => i += 1,
            None => return Err("unterminated JSON string"),
        }
    }
}

/// The index after the JSON value starting at `i`.
fn skip_value(b: &[u8], mut i: usize) -> Result<usize, Fail> {
    match b.get(i) {
        Some(b'"') => skip_string(b, i),
        Some(b'{') | Some(b'[') => {
            let mut depth = 0usize;
            loop {
                match b.get(i) {
                    Some(b'"') => {
                        i = skip_string(b, i)?;
                        continue;
                    }
                    Some(b'{') | Some(b'[') => depth += 1,
                    Some(b'}') | Some(b']') => {
                        depth -= 1;
                        if depth == 0 {
                            return Ok(i + 1);
                        }
                    }
                    Some(_) => {}
                    None => return Err("unterminated JSON value"),
                }
                i += 1;
            }
        }
        Some(_) => {
            while !matches!(b.get(i), Some(b',') | Some(b'}') | Some(b']') | None) {
                i += 1;
            }
            Ok(i)
        }
        None => Err("missing JSON value"),
    }
}

/// The characters of an escaped JSON string's inside, each as its escaped bytes (a surrogate pair is one).
fn units(s: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        let start = i;
        let c = s[i];
        if c == b'\\' {
            if s.get(i + 1) == Some(&b'u') {
                let high = std::str::from_utf8(&s[i + 2..(i + 6).min(s.len())])
                    .ok()
                    .and_then(|h| u32::from_str_radix(h, 16).ok())
                    .unwrap_or(0);
                i += 6;
                if (0xD800..0xDC00).contains(&high)
                    && s.get(i) == Some(&b'\\')
                    && s.get(i + 1) == Some(&b'u')
                {
                    i += 6;
                }
            } else {
                i += 2;
            }
        } else {
            i += match c {
                0x00..=0x7F => 1,
                0xC0..=0xDF => 2,
                0xE0..=0xEF => 3,
                _ => 4,
            };
        }
        out.push((start, i.min(s.len())));
    }
    out
}

/// An escaped JSON string's inside as UTF-8 bytes.
fn unescape(s: &[u8]) -> Result<Vec<u8>, Fail> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    let hex = |i: usize| -> Result<u32, Fail> {
        let h = s.get(i..i + 4).ok_or("short \\u escape")?;
        u32::from_str_radix(std::str::from_utf8(h).map_err(|_| "bad \\u escape")?, 16)
            .map_err(|_| "bad \\u escape")
    };
    while i < s.len() {
        let c = s[i];
        if c != b'\\' {
            out.push(c);
            i += 1;
            continue;
        }
        let e = *s.get(i + 1).ok_or("dangling escape")?;
        i += 2;
        let ch = match e {
            b'"' => '"' as u32,
            b'\\' => '\\' as u32,
            b'/' => '/' as u32,
            b'n' => '\n' as u32,
            b'r' => '\r' as u32,
            b't' => '\t' as u32,
            b'b' => 8,
            b'f' => 12,
            b'u' => {
                let mut u = hex(i)?;
                i += 4;
                if (0xD800..0xDC00).contains(&u)
                    && s.get(i) == Some(&b'\\')
                    && s.get(i + 1) == Some(&b'u')
                {
                    let low = hex(i + 2)?;
                    if (0xDC00..0xE000).contains(&low) {
                        u = 0x10000 + ((u - 0xD800) << 10) + (low - 0xDC00);
                        i += 6;
                    }
                }
                u
            }
            _ => return Err("bad escape"),
        };
        let ch = char::from_u32(ch).unwrap_or('\u{FFFD}');
        let mut buf = [0u8; 4];
        out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
    }
    Ok(out)
}

/// Each byte's base64 value; 64: not a base64 digit.
const BASE64: [u8; 256] = {
    let mut t = [64u8; 256];
    let digits = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut i = 0;
    while i < 64 {
        t[digits[i] as usize] = i as u8;
        i += 1;
    }
    t
};

fn base64_decode(s: &[u8]) -> Result<Vec<u8>, Fail> {
    let s = match s.iter().position(|&c| c == b'=') {
        Some(end) => &s[..end],
        None => s,
    };
    let mut out = Vec::with_capacity(s.len() / 4 * 3 + 3);
    let digit = |c: u8| -> Result<u32, Fail> {
        match BASE64[c as usize] {
            64 => Err("bad base64"),
            v => Ok(v as u32),
        }
    };
    let mut quads = s.chunks_exact(4);
    for q in &mut quads {
        let n = digit(q[0])? << 18 | digit(q[1])? << 12 | digit(q[2])? << 6 | digit(q[3])?;
        out.extend_from_slice(&[(n >> 16) as u8, (n >> 8) as u8, n as u8]);
    }
    let (mut acc, mut bits) = (0u32, 0u32);
    for &c in quads.remainder() {
        acc = (acc << 6) | digit(c)?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Ok(out)
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn push_hex(out: &mut Vec<u8>, digest: &[u8]) {
    let mut buf = [0u8; 128];
    for (pair, &x) in buf.chunks_exact_mut(2).zip(digest) {
        pair[0] = HEX[(x >> 4) as usize];
        pair[1] = HEX[(x & 15) as usize];
    }
    out.extend_from_slice(&buf[..2 * digest.len()]);
}

impl Rules {
    pub(crate) const EXCLUDE: u8 = EXCLUDE;

    /// The rule of each column of a layout (`"name":` per column), by its name.
    pub(crate) fn per_column(&self, keys: &[Vec<u8>]) -> Vec<Option<usize>> {
        keys.iter()
            .map(|k| {
                let name = &k[..k.len() - 1];
                self.columns.iter().position(|r| r.key == name)
            })
            .collect()
    }

    pub(crate) fn kind(&self, rule: usize) -> u8 {
        self.columns[rule].kind
    }

    /// Whether the `j`-th primary-key column is hashed, and as bytes.
    pub(crate) fn key_column(&self, j: usize) -> Option<bool> {
        self.key_columns.get(j).copied().flatten()
    }

    pub(crate) fn hash(&self, token: &[u8], binary: bool, out: &mut Vec<u8>) -> Result<(), Fail> {
        let raw: Vec<u8>;
        let input: &[u8] = if token.first() == Some(&b'"') {
            let inside = &token[1..token.len() - 1];
            if binary {
                // Base64 has no escapes but `\/`.
                raw = if inside.contains(&b'\\') {
                    base64_decode(&unescape(inside)?)?
                } else {
                    base64_decode(inside)?
                };
                &raw
            } else if inside.contains(&b'\\') {
                raw = unescape(inside)?;
                &raw
            } else {
                inside // no escape: the bytes are the text's UTF-8
            }
        } else {
            token
        };
        out.push(b'"');
        if let Some(keyed) = &self.mac512 {
            let mut mac = keyed.clone();
            Mac::update(&mut mac, input);
            push_hex(out, &mac.finalize().into_bytes());
        } else {
            let mut mac = self.mac256.clone();
            Mac::update(&mut mac, input);
            push_hex(out, &mac.finalize().into_bytes());
        }
        out.push(b'"');
        Ok(())
    }

    /// Column rule `rule`'s form of one value token (never called for exclude).
    pub(crate) fn ruled(&self, rule: usize, token: &[u8], out: &mut Vec<u8>) -> Result<(), Fail> {
        self.value(&self.columns[rule], token, out)
    }

    fn value(&self, rule: &ColumnRule, token: &[u8], out: &mut Vec<u8>) -> Result<(), Fail> {
        if token == b"null" {
            out.extend_from_slice(token);
            return Ok(());
        }
        if rule.kind == HASH {
            return self.hash(token, rule.binary, out);
        }
        if token.len() < 2 || token[0] != b'"' {
            return Err("truncate and mask take text values");
        }
        let inside = &token[1..token.len() - 1];
        let chars = units(inside);
        out.push(b'"');
        if rule.kind == TRUNCATE {
            let end = chars.get(rule.n).map_or(inside.len(), |u| u.0);
            out.extend_from_slice(&inside[..end]);
        } else {
            debug_assert_eq!(rule.kind, MASK);
            let masked = chars.len().saturating_sub(rule.n);
            for _ in 0..masked {
                out.extend_from_slice(&rule.with);
            }
            let from = chars.get(masked).map_or(inside.len(), |u| u.0);
            out.extend_from_slice(&inside[from..]);
        }
        out.push(b'"');
        Ok(())
    }

    fn object(&self, obj: &[u8], out: &mut Vec<u8>) -> Result<(), Fail> {
        if obj.first() != Some(&b'{') {
            return Err("not a JSON object");
        }
        out.push(b'{');
        let mut first = true;
        let mut i = 1;
        if obj.get(1) == Some(&b'}') {
            out.push(b'}');
            return Ok(());
        }
        loop {
            let key_end = skip_string(obj, i)?;
            let key = &obj[i..key_end];
            let start = key_end + 1;
            let stop = skip_value(obj, start)?;
            let token = &obj[start..stop];
            let rule = self.columns.iter().find(|r| r.key == key);
            if rule.map_or(true, |r| r.kind != EXCLUDE) {
                if !first {
                    out.push(b',');
                }
                first = false;
                out.extend_from_slice(&obj[i..start]);
                match rule {
                    None => out.extend_from_slice(token),
                    Some(r) => self.value(r, token, out)?,
                }
            }
            match obj.get(stop) {
                Some(b'}') => break,
                Some(b',') => i = stop + 1,
                _ => return Err("malformed JSON object"),
            }
        }
        out.push(b'}');
        Ok(())
    }

    fn key(&self, array: &[u8], out: &mut Vec<u8>) -> Result<(), Fail> {
        out.push(b'[');
        let mut i = 1;
        for (j, hashed) in self.key_columns.iter().enumerate() {
            if j > 0 {
                out.push(b',');
            }
            let stop = skip_value(array, i)?;
            let token = &array[i..stop];
            match hashed {
                Some(binary) if token != b"null" => self.hash(token, *binary, out)?,
                _ => out.extend_from_slice(token),
            }
            i = stop + 1;
        }
        out.push(b']');
        Ok(())
    }
}

fn offsets_of(n: usize, offsets: &[u8]) -> Result<Vec<usize>, Fail> {
    if offsets.len() < 4 * (n + 1) {
        return Err("offsets too short");
    }
    Ok((0..=n)
        .map(|k| i32::from_le_bytes(offsets[4 * k..4 * k + 4].try_into().unwrap()) as usize)
        .collect())
}

fn each(
    n: usize,
    values: &[u8],
    offsets: &[u8],
    mut f: impl FnMut(&[u8], &mut Vec<u8>) -> Result<(), Fail>,
) -> Result<(Vec<u8>, Vec<u8>), Fail> {
    let at = offsets_of(n, offsets)?;
    let base = at[0];
    let mut out = Vec::with_capacity(values.len());
    let mut out_offsets = Vec::with_capacity(4 * (n + 1));
    out_offsets.extend_from_slice(&0i32.to_le_bytes());
    for k in 0..n {
        let (s, e) = (at[k] - base, at[k + 1] - base);
        f(
            values.get(s..e).ok_or("offsets beyond the values")?,
            &mut out,
        )?;
        let end = i32::try_from(out.len()).map_err(|_| "batch larger than 2 GiB")?;
        out_offsets.extend_from_slice(&end.to_le_bytes());
    }
    Ok((out, out_offsets))
}

#[pymethods]
impl Redactor {
    /// columns: (name as a JSON string token, kind, length or keep, mask character escaped, binary) per ruled
    /// column; key_columns: per primary-key column, whether it is hashed as bytes (None: not hashed);
    /// secret: the HMAC key; algorithm: sha256 or sha512; hash_prefix: b"database\0table\0".
    #[new]
    fn new(
        columns: Vec<(String, u8, usize, String, bool)>,
        key_columns: Vec<Option<bool>>,
        secret: Vec<u8>,
        algorithm: &str,
        hash_prefix: Vec<u8>,
    ) -> PyResult<Self> {
        if columns.iter().any(|c| c.1 > TRUNCATE) {
            return Err(PyValueError::new_err("bad rule kind"));
        }
        Ok(Redactor {
            rules: Arc::new(Rules {
                columns: columns
                    .into_iter()
                    .map(|(key, kind, n, with, binary)| ColumnRule {
                        key: key.into_bytes(),
                        kind,
                        n,
                        with: with.into_bytes(),
                        binary,
                    })
                    .collect(),
                key_columns,
                mac256: Hmac::<Sha256>::new_from_slice(&secret)
                    .map_err(|_| PyValueError::new_err("bad HMAC key"))?,
                mac512: match algorithm {
                    "sha256" => None,
                    "sha512" => Some(
                        Hmac::<Sha512>::new_from_slice(&secret)
                            .map_err(|_| PyValueError::new_err("bad HMAC key"))?,
                    ),
                    _ => return Err(PyValueError::new_err("algorithm: sha256 or sha512")),
                },
                hash_prefix,
            }),
        })
    }

    /// `n` rendered objects (values, int32 offsets) in their ruled form: (n, values, offsets).
    fn objects<'py>(
        &self,
        py: Python<'py>,
        n: usize,
        values: &[u8],
        offsets: &[u8],
    ) -> PyResult<Bound<'py, PyAny>> {
        let (v, o) = py
            .detach(|| each(n, values, offsets, |obj, out| self.rules.object(obj, out)))
            .map_err(PyValueError::new_err)?;
        Ok((n, PyBytes::new(py, &v), PyBytes::new(py, &o))
            .into_pyobject(py)?
            .into_any())
    }

    /// `n` rendered primary keys with their hashed columns hashed, and the keys' hashes: two (n, values, offsets).
    fn keys<'py>(
        &self,
        py: Python<'py>,
        n: usize,
        values: &[u8],
        offsets: &[u8],
    ) -> PyResult<Bound<'py, PyAny>> {
        let (kv, ko) = py
            .detach(|| each(n, values, offsets, |key, out| self.rules.key(key, out)))
            .map_err(PyValueError::new_err)?;
        let (hv, ho) = py
            .detach(|| {
                each(n, &kv, &ko, |key, out| {
                    let mut hasher = Blake2bVar::new(8).expect("8-byte BLAKE2b");
                    hasher.update(&self.rules.hash_prefix);
                    hasher.update(key);
                    let mut digest = [0u8; 8];
                    hasher
                        .finalize_variable(&mut digest)
                        .expect("8-byte digest");
                    push_hex(out, &digest);
                    Ok(())
                })
            })
            .map_err(PyValueError::new_err)?;
        Ok((
            (n, PyBytes::new(py, &kv), PyBytes::new(py, &ko)),
            (n, PyBytes::new(py, &hv), PyBytes::new(py, &ho)),
        )
            .into_pyobject(py)?
            .into_any())
    }
}
