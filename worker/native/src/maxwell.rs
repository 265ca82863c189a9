//! Maxwell's JSON for runs of row batches, written from the batches' Arrow string columns: the JSON-lines sink's
//! lines, and the Kafka sink's messages (value, key, partition) ready for `Producer.produce_batch`.
//!
//! Mirrors `mysqlcapture_worker.sinks.maxwell.row_line` (what each line holds, in Maxwell's order) and
//! `mysqlcapture_worker.sinks.kafka_routing.Router` (keys and partitions) decision for decision; the unit tests
//! compare the two on randomized batches under every output option and routing setting.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::{push_int, OwnedBuffer};

type Fail = &'static str;

/// An Arrow string column as Python hands it over: (offset, length, validity, offsets, values), the buffers as
/// `pyarrow.StringArray.buffers()` gives them.
#[derive(FromPyObject)]
pub(crate) struct Column(
    usize,
    usize,
    Option<PyBuffer<i8>>,
    PyBuffer<i8>,
    Option<PyBuffer<i8>>,
);

/// A row batch's plan: what its rows share, rendered by Python once, and its columns.
#[derive(FromPyObject)]
struct Batch(
    Vec<u8>,            // head: `{"database":..,"table":..,"type":..,"ts":..` (and `"xid"`)
    Vec<u8>,            // middle: position, gtid, server_id, thread_id as the options ask
    bool,               // output_primary_keys
    Option<Vec<u8>>,    // `,"primary_key_columns":[..]` (output_primary_key_columns)
    Option<(i64, i64)>, // xoffset: (first row's, step), when written
    bool,               // the last row ends its transaction and `"commit":true` is written
    Option<(i64, i64)>, // _order_key: (first row's, step), when written
    Column,             // data
    Option<Column>,     // old
    Option<Column>,     // primary key
    Option<(usize, Vec<u8>, Vec<u8>, i64, i64)>, // Kafka: (group, key head, key tail, partition, hashed over)
);

/// A column's buffers as slices, checked once against its length so that reading a row cannot go out of bounds.
pub(crate) struct Strings<'a> {
    offset: usize,
    pub(crate) len: usize,
    validity: Option<&'a [u8]>,
    offsets: &'a [u8],
    values: &'a [u8],
}

fn slice_of(b: &PyBuffer<i8>) -> Result<&[u8], Fail> {
    if !b.is_c_contiguous() {
        return Err("an Arrow buffer is not contiguous");
    }
    // Read-only bytes that the PyBuffer keeps exported (and alive) while the slice is borrowed from it.
    Ok(unsafe { std::slice::from_raw_parts(b.buf_ptr() as *const u8, b.len_bytes()) })
}

impl<'a> Strings<'a> {
    pub(crate) fn of(c: &'a Column) -> Result<Self, Fail> {
        let s = Strings {
            offset: c.0,
            len: c.1,
            validity: c.2.as_ref().map(slice_of).transpose()?,
            offsets: slice_of(&c.3)?,
            values: c.4.as_ref().map(slice_of).transpose()?.unwrap_or(&[]),
        };
        let end = s.offset + s.len;
        if s.offsets.len() < 4 * (end + 1) || s.validity.is_some_and(|v| v.len() * 8 < end) {
            return Err("an Arrow column is shorter than its length");
        }
        let mut last = s.at(s.offset);
        for k in s.offset + 1..=end {
            let next = s.at(k);
            if next < last || next > s.values.len() {
                return Err("an Arrow column's offsets are out of order");
            }
            last = next;
        }
        Ok(s)
    }

    fn at(&self, k: usize) -> usize {
        i32::from_le_bytes(self.offsets[4 * k..4 * k + 4].try_into().unwrap()) as u32 as usize
    }

    /// The bytes of all its values.
    pub(crate) fn span(&self) -> usize {
        self.at(self.offset + self.len) - self.at(self.offset)
    }

    pub(crate) fn get(&self, i: usize) -> Option<&'a [u8]> {
        let j = self.offset + i;
        if let Some(v) = self.validity {
            if v[j >> 3] >> (j & 7) & 1 == 0 {
                return None;
            }
        }
        Some(&self.values[self.at(j)..self.at(j + 1)])
    }
}

struct Plan<'a> {
    b: &'a Batch,
    data: Strings<'a>,
    old: Option<Strings<'a>>,
    pk: Option<Strings<'a>>,
}

impl<'a> Plan<'a> {
    fn of(b: &'a Batch) -> Result<Self, Fail> {
        let p = Plan {
            b,
            data: Strings::of(&b.7)?,
            old: b.8.as_ref().map(Strings::of).transpose()?,
            pk: b.9.as_ref().map(Strings::of).transpose()?,
        };
        let n = p.data.len;
        if p.old.as_ref().is_some_and(|o| o.len != n) || p.pk.as_ref().is_some_and(|k| k.len != n) {
            return Err("a batch's columns differ in length");
        }
        if b.10.is_some() && p.pk.is_none() {
            return Err("a batch routed by key has no primary key");
        }
        Ok(p)
    }

    /// About the bytes of its rows' lines, to size the output once.
    fn size(&self) -> usize {
        let b = self.b;
        let keys = self.pk.as_ref().map_or(0, |k| {
            k.span() * 2 + k.len * b.3.as_ref().map_or(0, Vec::len)
        });
        let each = b.0.len() + b.1.len() + 96;
        self.data.span() + self.old.as_ref().map_or(0, Strings::span) + keys + self.data.len * each
    }

    /// Row `i`'s line, as `row_line` writes it (no line end).
    fn line(&self, i: usize, out: &mut Vec<u8>) {
        let b = self.b;
        let n = self.data.len;
        out.extend_from_slice(&b.0);
        let ends = b.5 && i + 1 == n;
        if let Some((first, step)) = b.4 {
            if !ends {
                out.extend_from_slice(b",\"xoffset\":");
                push_int(out, first as i128 + i as i128 * step as i128);
            }
        }
        if ends {
            out.extend_from_slice(b",\"commit\":true");
        }
        out.extend_from_slice(&b.1);
        // A row without a key (its table has no primary key): empty arrays, as Maxwell writes them.
        let key = self.pk.as_ref().and_then(|k| k.get(i)).unwrap_or(b"[]");
        if b.2 {
            out.extend_from_slice(b",\"primary_key\":");
            out.extend_from_slice(key);
        }
        if let Some(columns) = &b.3 {
            out.extend_from_slice(columns);
        }
        out.extend_from_slice(b",\"data\":");
        out.extend_from_slice(self.data.get(i).unwrap_or(b"{}"));
        if let Some(old) = self.old.as_ref().and_then(|o| o.get(i)) {
            if old != b"{}" {
                out.extend_from_slice(b",\"old\":");
                out.extend_from_slice(old);
            }
        }
        if let Some((first, step)) = b.6 {
            out.extend_from_slice(b",\"_order_key\":");
            push_int(out, first as i128 + i as i128 * step as i128);
        }
        out.push(b'}');
    }

    /// Row `i`'s Kafka key, and its (group, partition).
    fn key(&self, i: usize, out: &mut Vec<u8>, murmur: bool) -> Result<(usize, i64), Fail> {
        let (group, head, tail, partition, over) =
            self.b.10.as_ref().ok_or("a batch without its route")?;
        let array = self
            .pk
            .as_ref()
            .and_then(|k| k.get(i))
            .ok_or("a row without its primary key")?;
        let value = array
            .strip_prefix(b"[")
            .and_then(|v| v.strip_suffix(b"]"))
            .ok_or("a primary key that is not a JSON array")?;
        out.extend_from_slice(head);
        out.extend_from_slice(value);
        out.extend_from_slice(tail);
        if *over <= 0 {
            return Ok((*group, *partition));
        }
        let text = if value == b"null" {
            "None".to_owned()
        } else {
            java_text(value)?
        };
        let h = if murmur {
            murmur3(text.as_bytes(), MURMUR_SEED)
        } else {
            java_hash(&text)
        };
        Ok((*group, (h as i64).abs() % over))
    }
}

const MURMUR_SEED: u32 = 25342;

/// Java's String.hashCode (over UTF-16 code units).
fn java_hash(text: &str) -> i32 {
    text.encode_utf16()
        .fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(u as i32))
}

/// MurmurHash3 x86 32-bit, as Guava (and Maxwell) compute it.
fn murmur3(data: &[u8], seed: u32) -> i32 {
    let (c1, c2) = (0xcc9e_2d51u32, 0x1b87_3593u32);
    let mix = |k: u32| k.wrapping_mul(c1).rotate_left(15).wrapping_mul(c2);
    let mut h = seed;
    let mut blocks = data.chunks_exact(4);
    for block in &mut blocks {
        h ^= mix(u32::from_le_bytes(block.try_into().unwrap()));
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        let k = tail.iter().rev().fold(0u32, |k, &b| (k << 8) | b as u32);
        h ^= mix(k);
    }
    h ^= data.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    h as i32
}

/// A rendered value as Java's toString prints it in Maxwell's row map (`kafka_routing._java_text`): a string's
/// own text, a list as `[a, b]`, anything else as written.
fn java_text(value: &[u8]) -> Result<String, Fail> {
    match value.first() {
        Some(b'"') => unescape(value),
        Some(b'[') => {
            let members = members(value)?
                .into_iter()
                .map(java_text)
                .collect::<Result<Vec<_>, _>>()?;
            Ok(format!("[{}]", members.join(", ")))
        }
        _ => String::from_utf8(value.to_vec()).map_err(|_| "a key value that is not UTF-8"),
    }
}

/// The text of a JSON string literal.
fn unescape(s: &[u8]) -> Result<String, Fail> {
    let body = s
        .get(1..s.len().saturating_sub(1))
        .filter(|_| s.len() >= 2 && s.ends_with(b"\""));
    let body = body.ok_or("an unterminated JSON string")?;
    let mut units: Vec<u16> = Vec::with_capacity(body.len());
    let text = std::str::from_utf8(body).map_err(|_| "a key value that is not UTF-8")?;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            let mut buf = [0u16; 2];
            units.extend_from_slice(c.encode_utf16(&mut buf));
            continue;
        }
        let unit = match chars.next().ok_or("a JSON string ending in a backslash")? {
            '"' => b'"' as u16,
            '\\' => b'\\' as u16,
            '/' => b'/' as u16,
            'b' => 8,
            'f' => 12,
            'n' => 10,
            'r' => 13,
            't' => 9,
            'u' => {
                let hex: String = chars.by_ref().take(4).collect();
                u16::from_str_radix(&hex, 16).map_err(|_| "a bad \\u escape")?
            }
            _ => return Err("a bad JSON escape"),
        };
        units.push(unit);
    }
    Ok(String::from_utf16_lossy(&units))
}

/// The members of a JSON array, each as written (whitespace trimmed).
fn members(array: &[u8]) -> Result<Vec<&[u8]>, Fail> {
    let inner = &array[1..array
        .len()
        .checked_sub(1)
        .filter(|&e| e >= 1)
        .ok_or("a bad JSON array")?];
    let (mut out, mut depth, mut quoted, mut escaped, mut start) =
        (Vec::new(), 0usize, false, false, 0usize);
    for (i, &c) in inner.iter().enumerate() {
        if quoted {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => quoted = false,
                _ => {}
            }
            continue;
        }
        match c {
            b'"' => quoted = true,
            b'[' | b'{' => depth += 1,
            b']' | b'}' => depth = depth.checked_sub(1).ok_or("a bad JSON array")?,
            b',' if depth == 0 => {
                out.push(inner[start..i].trim_ascii());
                start = i + 1;
            }
            _ => {}
        }
    }
    let last = inner[start..].trim_ascii();
    if !last.is_empty() || !out.is_empty() {
        out.push(last);
    }
    Ok(out)
}

/// Consecutive row batches' Maxwell JSON. `messages` False: every row's line with its line end, in one buffer.
/// True: the Kafka messages as `Messages` (every key and value in two buffers, grouped by topic group and
/// partition); `murmur` hashes partitions with MurmurHash3 instead of Java's hashCode.
#[pyfunction]
#[pyo3(signature = (batches, messages=false, murmur=false))]
pub fn maxwell_rows<'py>(
    py: Python<'py>,
    batches: Vec<Batch>,
    messages: bool,
    murmur: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let plans = batches
        .iter()
        .map(Plan::of)
        .collect::<Result<Vec<_>, _>>()
        .map_err(PyValueError::new_err)?;
    if !messages {
        let lines = py.detach(|| {
            let mut out = Vec::with_capacity(plans.iter().map(Plan::size).sum());
            for p in &plans {
                for i in 0..p.data.len {
                    p.line(i, &mut out);
                    out.push(b'\n');
                }
            }
            out
        });
        return Ok(Bound::new(py, OwnedBuffer { data: lines })?.into_any());
    }
    let rendered = py
        .detach(|| Messages::render(&plans, murmur))
        .map_err(PyValueError::new_err)?;
    Ok(Bound::new(py, rendered)?.into_any())
}

/// A run's Kafka messages: every value and key in one buffer each, and the rows' indexes grouped by (topic group,
/// partition) in the order the groups first appear, each group's rows in their order (all the order Kafka keeps).
#[pyclass(frozen)]
pub struct Messages {
    values: Vec<u8>,
    value_ends: Vec<usize>,
    keys: Vec<u8>,
    key_ends: Vec<usize>,
    pub groups: Vec<((usize, i64), Vec<usize>)>,
    /// The bytes of every key and value, and of the largest message (key and value).
    #[pyo3(get)]
    total: usize,
    #[pyo3(get)]
    largest: usize,
}

impl Messages {
    fn render(plans: &[Plan], murmur: bool) -> Result<Self, Fail> {
        let rows: usize = plans.iter().map(|p| p.data.len).sum();
        let mut m = Messages {
            values: Vec::with_capacity(plans.iter().map(Plan::size).sum()),
            value_ends: Vec::with_capacity(rows),
            keys: Vec::new(),
            key_ends: Vec::with_capacity(rows),
            groups: Vec::new(),
            total: 0,
            largest: 0,
        };
        for p in plans {
            for i in 0..p.data.len {
                let (v0, k0) = (m.values.len(), m.keys.len());
                p.line(i, &mut m.values);
                m.value_ends.push(m.values.len());
                let route = p.key(i, &mut m.keys, murmur)?;
                m.key_ends.push(m.keys.len());
                m.largest = m.largest.max(m.values.len() - v0 + m.keys.len() - k0);
                let row = m.value_ends.len() - 1;
                match m.groups.iter().position(|(r, _)| *r == route) {
                    Some(g) => m.groups[g].1.push(row),
                    None => m.groups.push((route, vec![row])),
                }
            }
        }
        m.total = m.values.len() + m.keys.len();
        Ok(m)
    }

    pub fn value(&self, i: usize) -> &[u8] {
        &self.values[if i == 0 { 0 } else { self.value_ends[i - 1] }..self.value_ends[i]]
    }

    pub fn key(&self, i: usize) -> &[u8] {
        &self.keys[if i == 0 { 0 } else { self.key_ends[i - 1] }..self.key_ends[i]]
    }
}

#[pymethods]
impl Messages {
    /// The messages as `Producer.produce_batch` takes them: `[(group, partition, [{"key": k, "value": v}, ...])]`.
    fn dicts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let (key_name, value_name) = (intern!(py, "key"), intern!(py, "value"));
        let listed = PyList::empty(py);
        for ((group, partition), rows) in &self.groups {
            let messages = PyList::empty(py);
            for &i in rows {
                let message = PyDict::new(py);
                message.set_item(key_name, PyBytes::new(py, self.key(i)))?;
                message.set_item(value_name, PyBytes::new(py, self.value(i)))?;
                messages.append(message)?;
            }
            listed.append((*group, *partition, messages))?;
        }
        Ok(listed)
    }

    fn __len__(&self) -> usize {
        self.value_ends.len()
    }
}
