//! The snapshot's compiled path: a chunk's result set, read straight off the wire, to Arrow columns.
//!
//! The worker sends a chunk's `SELECT` on its PyMySQL connection and hands the socket's bytes, as
//! they arrive, to a `ResultReader`: it walks the result set (column count, column definitions, EOF,
//! one packet per row, EOF) and renders each row as it completes, with the same `Layout` as the
//! binlog renderer. No Python object is made per row or per value.
//!
//! Two row formats. The binary protocol (a prepared statement's result, the worker's default) sends
//! numbers and temporal values as binary fields, which the server need not print: a DOUBLE printed
//! as text costs the server about as much as the rest of its row. The text protocol sends every value
//! as the server prints it. In both, with `character_set_results = NULL` and UTC, strings and bytes
//! are their raw bytes in the column's charset, BIT its big-endian bytes, DECIMAL its text.
//!
//! Text column kinds (mirrored by mysqlcapture_worker.snapshot.fast).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::java::{java_decimal_in_place, push_java_float};
use crate::{
    blob, push_base64, push_d2, push_double, push_fraction, push_hms, push_int, push_text,
    push_ymd, py_column, py_marks, take, Column, Fail, Image, Layout, Rendered,
};

const T_INT: u8 = 0; // decimal digits (INT*, YEAR): leading zeros (ZEROFILL) dropped
const T_VERBATIM: u8 = 1; // DECIMAL: the server's text as it is
const T_DOUBLE: u8 = 2;
const T_BIT1: u8 = 3; // BIT(1): its byte, as a number (as T_BITS)
const T_QUOTED: u8 = 4; // DATE, TIME, DATETIME, TIMESTAMP: the server's ASCII text, quoted
const T_UTF8: u8 = 5; // UTF-8 text
const T_BYTE_TABLE: u8 = 6; // single-byte-charset text; members: 256 escaped fragments
const T_BASE64: u8 = 7; // binary bytes
const T_SET_UTF8: u8 = 8; // a SET's members joined by `,`, UTF-8
const T_SET_BYTE_TABLE: u8 = 9; // the same, single-byte charset; members: 256 escaped fragments
const T_BITS: u8 = 10; // BIT(n > 1): big-endian bytes, as a number
const T_FLOAT: u8 = 11; // FLOAT, selected as DOUBLE (exact): narrowed back to float32
const T_BLOB: u8 = 16; // T_BLOB + a blob kind (blob.rs): JSON, GEOMETRY, VECTOR, multi-byte charsets

struct TextCol {
    kind: u8,
    members: Vec<Vec<u8>>,
    blob: Option<blob::Blob>,
}

fn parse_int(raw: &[u8]) -> Result<i128, Fail> {
    let (neg, digits) = match raw.first() {
        Some(b'-') => (true, &raw[1..]),
        _ => (false, raw),
    };
    if digits.is_empty() || digits.len() > 38 {
        return Err("bad integer");
    }
    let mut v: i128 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return Err("bad integer");
        }
        v = v * 10 + (c - b'0') as i128;
    }
    Ok(if neg { -v } else { v })
}

/// One value as a row carries it.
enum Value<'a> {
    Bytes(&'a [u8]),
    Int(i128),
    Double(f64),
    /// DATE, DATETIME, TIMESTAMP: year, month, day, hour, minute, second, microsecond; `time` false for a DATE.
    DateTime([u64; 7], bool),
    /// TIME: negative, hours (days folded in), minute, second, microsecond.
    Time(bool, u64, u64, u64, u64),
}

impl TextCol {
    /// Whether `value` is the JSON document `null` (a JSON column's: `blob::is_json_null`).
    fn json_null(&self, value: &Value<'_>) -> bool {
        matches!(value, Value::Bytes(raw) if self.kind >= T_BLOB && blob::is_json_null((self.kind - T_BLOB) as i64, raw))
    }

    /// Render one value (not NULL) into `out`; `fsp`: the column's fractional digits (temporal types).
    fn render(&self, value: Value<'_>, fsp: usize, out: &mut Vec<u8>) -> Result<(), Fail> {
        let raw = match value {
            Value::Bytes(raw) => raw,
            Value::Int(v) if self.kind == T_INT => {
                push_int(out, v);
                return Ok(());
            }
            Value::Double(v) if self.kind == T_DOUBLE => {
                push_double(out, v);
                return Ok(());
            }
            Value::Double(v) if self.kind == T_FLOAT => {
                push_java_float(out, v as f32);
                return Ok(());
            }
            Value::DateTime(f, time) if self.kind == T_QUOTED => {
                out.push(b'"');
                push_ymd(out, f[0] as i64, f[1], f[2]);
                if time {
                    out.push(b' ');
                    push_hms(out, f[3], f[4], f[5]);
                    if fsp > 0 {
                        push_fraction(out, f[6], fsp.min(6))?;
                    }
                }
                out.push(b'"');
                return Ok(());
            }
            Value::Time(negative, hours, minutes, seconds, micro) if self.kind == T_QUOTED => {
                out.push(b'"');
                if negative {
                    out.push(b'-');
                }
                if hours < 100 {
                    push_d2(out, hours);
                } else {
                    push_int(out, hours as i128);
                }
                out.push(b':');
                push_d2(out, minutes);
                out.push(b':');
                push_d2(out, seconds);
                if fsp > 0 {
                    push_fraction(out, micro, fsp.min(6))?;
                }
                out.push(b'"');
                return Ok(());
            }
            _ => return Err("a binary value of a type the column does not have"),
        };
        match self.kind {
            T_INT => push_int(out, parse_int(raw)?),
            T_VERBATIM => {
                if raw.is_empty()
                    || !raw
                        .iter()
                        .all(|c| c.is_ascii_digit() || *c == b'.' || *c == b'-')
                {
                    return Err("bad DECIMAL");
                }
                let start = out.len();
                out.extend_from_slice(raw);
                java_decimal_in_place(out, start);
            }
            T_DOUBLE | T_FLOAT => {
                let text = std::str::from_utf8(raw).map_err(|_| "bad DOUBLE")?;
                if !text
                    .bytes()
                    .all(|c| c.is_ascii_digit() || b"+-.eE".contains(&c))
                {
                    return Err("bad DOUBLE");
                }
                let v = text.parse::<f64>().map_err(|_| "bad DOUBLE")?;
                if self.kind == T_FLOAT {
                    push_java_float(out, v as f32);
                } else {
                    push_double(out, v);
                }
            }
            T_BIT1 | T_BITS => {
                if raw.len() > 8 {
                    return Err("BIT value longer than 8 bytes");
                }
                push_int(
                    out,
                    raw.iter().fold(0u64, |v, c| v << 8 | *c as u64) as i128,
                );
            }
            T_QUOTED => {
                if !raw
                    .iter()
                    .all(|c| c.is_ascii_digit() || b"-:. ".contains(c))
                {
                    return Err("bad temporal text");
                }
                out.push(b'"');
                out.extend_from_slice(raw);
                out.push(b'"');
            }
            T_UTF8 | T_BYTE_TABLE | T_BASE64 => {
                out.push(b'"');
                match self.kind {
                    T_UTF8 => push_text(out, raw, None),
                    T_BYTE_TABLE => push_text(out, raw, Some(&self.members)),
                    _ => push_base64(out, raw, 0),
                }
                out.push(b'"');
            }
            T_SET_UTF8 | T_SET_BYTE_TABLE => {
                out.push(b'[');
                if !raw.is_empty() {
                    for (i, m) in raw.split(|c| *c == b',').enumerate() {
                        if i > 0 {
                            out.push(b',');
                        }
                        out.push(b'"');
                        let table = (self.kind == T_SET_BYTE_TABLE).then_some(&self.members[..]);
                        push_text(out, m, table);
                        out.push(b'"');
                    }
                }
                out.push(b']');
            }
            _ if self.kind >= T_BLOB => {
                self.blob.as_ref().ok_or("no blob plan")?.render(raw, out)?;
            }
            _ => return Err("unknown text column kind"),
        }
        Ok(())
    }
}

/// How one table's snapshot rows are rendered: built once per table, shared by its chunks' readers.
#[pyclass(frozen)]
pub(crate) struct TextRenderer {
    cols: Vec<TextCol>,
    layout: Layout,
    // Bytes of `data` per row in the last batch taken: a new batch's column starts that large (no regrowth).
    row_bytes: std::sync::atomic::AtomicUsize,
}

#[pymethods]
impl TextRenderer {
    /// columns: (kind, members) per column; keys, pk, hash_prefix, fallbacks as for `RowRenderer`.
    #[new]
    #[pyo3(signature = (columns, keys, pk, hash_prefix, fallbacks=None, redactor=None))]
    fn new(
        columns: Vec<(u8, Vec<String>)>,
        keys: Vec<String>,
        pk: Vec<usize>,
        hash_prefix: Option<Vec<u8>>,
        fallbacks: Option<Vec<Option<Py<PyAny>>>>,
        redactor: Option<PyRef<'_, crate::redact::Redactor>>,
    ) -> PyResult<Self> {
        let json = columns
            .iter()
            .map(|(kind, _)| *kind >= T_BLOB && blob::is_json((*kind - T_BLOB) as i64))
            .collect();
        let layout = Layout::checked(keys, pk, hash_prefix, columns.len())?
            .ruled(redactor)
            .with_json(json);
        let mut fallbacks = fallbacks.unwrap_or_default();
        fallbacks.resize_with(columns.len(), || None);
        let mut cols = Vec::with_capacity(columns.len());
        for ((kind, members), fallback) in columns.into_iter().zip(fallbacks) {
            if kind > T_FLOAT && kind < T_BLOB {
                return Err(PyValueError::new_err(format!(
                    "bad text column kind {kind}"
                )));
            }
            if matches!(kind, T_BYTE_TABLE | T_SET_BYTE_TABLE) && members.len() != 256 {
                return Err(PyValueError::new_err("a byte table has 256 entries"));
            }
            let members: Vec<Vec<u8>> = members.into_iter().map(String::into_bytes).collect();
            if kind >= T_BLOB {
                let blob = blob::Blob::checked((kind - T_BLOB) as i64, members, fallback)?;
                cols.push(TextCol {
                    kind,
                    members: Vec::new(),
                    blob: Some(blob),
                });
            } else {
                cols.push(TextCol {
                    kind,
                    members,
                    blob: None,
                });
            }
        }
        Ok(TextRenderer {
            cols,
            layout,
            row_bytes: std::sync::atomic::AtomicUsize::new(0),
        })
    }
}

// ------------------------------------------------------------------------------------- the wire
const MAX_PAYLOAD: usize = 0xFF_FFFF; // a packet this long is continued by the next one

// Field types of the column definitions, as far as the binary row format needs them.
const MT_TINY: u8 = 0x01;
const MT_SHORT: u8 = 0x02;
const MT_LONG: u8 = 0x03;
const MT_FLOAT: u8 = 0x04;
const MT_DOUBLE: u8 = 0x05;
const MT_TIMESTAMP: u8 = 0x07;
const MT_LONGLONG: u8 = 0x08;
const MT_INT24: u8 = 0x09;
const MT_DATE: u8 = 0x0a;
const MT_TIME: u8 = 0x0b;
const MT_DATETIME: u8 = 0x0c;
const MT_YEAR: u8 = 0x0d;
const MT_NEWDATE: u8 = 0x0e;
const UNSIGNED_FLAG: u16 = 32;

/// What a column definition says about how its values travel.
#[derive(Clone, Copy)]
struct Wire {
    ty: u8,
    unsigned: bool,
    decimals: u8,
}

fn column_definition(p: &[u8]) -> Result<Wire, Fail> {
    let mut o = 0;
    for _ in 0..6 {
        // catalog, schema, table, org_table, name, org_name
        let n = lenenc(p, &mut o)?.ok_or("bad column definition")?;
        o = o.checked_add(n as usize).ok_or("overflow")?;
    }
    lenenc(p, &mut o)?; // length of the fixed fields
    let f = take(p, &mut o, 10).map_err(|_| "truncated column definition")?;
    let flags = u16::from_le_bytes([f[7], f[8]]);
    Ok(Wire {
        ty: f[6],
        unsigned: flags & UNSIGNED_FLAG != 0,
        decimals: f[9],
    })
}

fn le_int(raw: &[u8], unsigned: bool) -> i128 {
    let mut bytes = [0u8; 8];
    bytes[..raw.len()].copy_from_slice(raw);
    let v = u64::from_le_bytes(bytes);
    if unsigned || raw.len() == 8 && v >> 63 == 0 {
        return v as i128;
    }
    let shift = 64 - 8 * raw.len() as u32;
    (((v << shift) as i64) >> shift) as i128
}

/// One value of a binary row at `o`, read as its column definition says.
fn binary_value<'a>(p: &'a [u8], o: &mut usize, w: Wire) -> Result<Value<'a>, Fail> {
    let fixed = |o: &mut usize, n: usize| take(p, o, n).map_err(|_| "truncated binary row");
    Ok(match w.ty {
        MT_TINY => Value::Int(le_int(fixed(o, 1)?, w.unsigned)),
        MT_SHORT | MT_YEAR => Value::Int(le_int(fixed(o, 2)?, w.unsigned)),
        MT_LONG | MT_INT24 => Value::Int(le_int(fixed(o, 4)?, w.unsigned)),
        MT_LONGLONG => Value::Int(le_int(fixed(o, 8)?, w.unsigned)),
        MT_DOUBLE => Value::Double(f64::from_le_bytes(
            fixed(o, 8)?.try_into().expect("8 bytes"),
        )),
        MT_FLOAT => {
            Value::Double(f32::from_le_bytes(fixed(o, 4)?.try_into().expect("4 bytes")) as f64)
        }
        MT_DATE | MT_DATETIME | MT_TIMESTAMP | MT_NEWDATE => {
            let n = fixed(o, 1)?[0] as usize;
            let b = fixed(o, n)?;
            let mut f = [0u64; 7];
            if n >= 4 {
                f[0] = u16::from_le_bytes([b[0], b[1]]) as u64;
                f[1] = b[2] as u64;
                f[2] = b[3] as u64;
            }
            if n >= 7 {
                f[3] = b[4] as u64;
                f[4] = b[5] as u64;
                f[5] = b[6] as u64;
            }
            if n >= 11 {
                f[6] = u32::from_le_bytes([b[7], b[8], b[9], b[10]]) as u64;
            }
            Value::DateTime(f, w.ty != MT_DATE && w.ty != MT_NEWDATE)
        }
        MT_TIME => {
            let n = fixed(o, 1)?[0] as usize;
            let b = fixed(o, n)?;
            if n == 0 {
                Value::Time(false, 0, 0, 0, 0)
            } else if n >= 8 {
                let days = u32::from_le_bytes([b[1], b[2], b[3], b[4]]) as u64;
                let micro = if n >= 12 {
                    u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as u64
                } else {
                    0
                };
                Value::Time(
                    b[0] == 1,
                    days * 24 + b[5] as u64,
                    b[6] as u64,
                    b[7] as u64,
                    micro,
                )
            } else {
                return Err("bad binary TIME");
            }
        }
        _ => {
            let n = lenenc(p, o)?.ok_or("NULL marker in a binary row")?;
            Value::Bytes(fixed(o, n as usize)?)
        }
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Count,
    Columns(u64),
    ColumnsEof,
    Rows,
    Done,
}

/// A length-encoded integer at `o` (None for the NULL marker 0xFB).
fn lenenc(p: &[u8], o: &mut usize) -> Result<Option<u64>, Fail> {
    let first = *p.get(*o).ok_or("truncated packet")?;
    let width = match first {
        0xFB => {
            *o += 1;
            return Ok(None);
        }
        0xFC => 2,
        0xFD => 3,
        0xFE => 8,
        0xFF => return Err("bad length-encoded integer"),
        _ => {
            *o += 1;
            return Ok(Some(first as u64));
        }
    };
    let bytes = p.get(*o + 1..*o + 1 + width).ok_or("truncated packet")?;
    *o += 1 + width;
    Ok(Some(
        bytes.iter().rev().fold(0u64, |v, c| v << 8 | *c as u64),
    ))
}

/// The values of one text-protocol row packet, in order (None for NULL).
fn row_values(p: &[u8]) -> impl Iterator<Item = Result<Option<&[u8]>, Fail>> {
    let mut o = 0;
    std::iter::from_fn(move || {
        if o >= p.len() {
            return None;
        }
        Some(lenenc(p, &mut o).and_then(|len| match len {
            None => Ok(None),
            Some(n) => {
                let end = o.checked_add(n as usize).ok_or("overflow")?;
                let v = p.get(o..end).ok_or("truncated row packet")?;
                o = end;
                Ok(Some(v))
            }
        }))
    })
}

fn is_eof(p: &[u8]) -> bool {
    p.first() == Some(&0xFE) && p.len() < 9
}

/// One chunk's result set, fed the connection's bytes as they arrive and rendered row by row.
///
/// A value the renderer cannot account for does not stop the reading: the rest of the result set
/// is still consumed (the connection stays usable) and `take` then raises, so the caller can read
/// the chunk again on the reference path. A server error (an error packet) ends the result set;
/// `server_error` returns its payload for PyMySQL to raise.
#[pyclass]
pub(crate) struct ResultReader {
    renderer: Py<TextRenderer>,
    binary: bool, // the rows are in the binary protocol's format (a prepared statement's result)
    wires: Vec<Wire>, // the column definitions read so far
    state: State,
    pending: Vec<u8>, // received bytes of a packet not yet complete
    joined: Vec<u8>,  // a payload of several packets (16 MiB and more), being joined
    img: Image,
    out: Rendered,
    hint: usize,   // rows the result set may hold (0: unknown)
    last: Vec<u8>, // the last row's packet: the key the next chunk starts after
    failed: Option<Fail>,
    server_error: Option<Vec<u8>>,
}

fn empty() -> Rendered {
    Rendered::new()
}

/// An empty batch whose `data` column has room for `rows` rows of `row_bytes` each.
fn sized(rows: usize, row_bytes: usize) -> Rendered {
    let mut out = empty();
    if rows > 0 && row_bytes > 0 {
        out.data
            .data
            .reserve(rows.saturating_mul(row_bytes + row_bytes / 8));
        out.data.offsets.reserve(rows + 1);
    }
    out
}

impl ResultReader {
    /// Consume every complete packet of `src`; returns how many bytes were used.
    fn packets(&mut self, r: &TextRenderer, src: &[u8]) -> Result<usize, Fail> {
        let mut o = 0;
        let mut last_row: Option<(usize, usize)> = None; // copied to `last` once, at the end
        while self.state != State::Done {
            let Some(head) = src.get(o..o + 4) else { break };
            let len = head[0] as usize | (head[1] as usize) << 8 | (head[2] as usize) << 16;
            let Some(payload) = src.get(o + 4..o + 4 + len) else {
                break;
            };
            if len == MAX_PAYLOAD || !self.joined.is_empty() {
                o += 4 + len;
                self.joined.extend_from_slice(payload);
                if len == MAX_PAYLOAD {
                    continue;
                }
                let whole = std::mem::take(&mut self.joined);
                if self.packet(r, &whole)? {
                    self.last = whole;
                    last_row = None;
                }
            } else {
                if self.packet(r, payload)? {
                    last_row = Some((o + 4, o + 4 + len));
                }
                o += 4 + len;
            }
        }
        if let Some((a, b)) = last_row {
            self.last.clear();
            self.last.extend_from_slice(&src[a..b]);
        }
        if self.state == State::Done && o < src.len() {
            return Err("bytes after the end of the result set");
        }
        Ok(o)
    }

    /// One packet; true when it was a row (rendered, or failed and remembered).
    fn packet(&mut self, r: &TextRenderer, p: &[u8]) -> Result<bool, Fail> {
        if p.first() == Some(&0xFF) && matches!(self.state, State::Count | State::Rows) {
            self.server_error = Some(p.to_vec());
            self.state = State::Done;
            return Ok(false);
        }
        match self.state {
            State::Count => {
                if p.first() == Some(&0x00) {
                    return Err("the statement returned no result set");
                }
                let n = lenenc(p, &mut 0)?.ok_or("bad column count")?;
                if n as usize != r.cols.len() {
                    return Err("the result set's columns differ from the table's");
                }
                self.state = State::Columns(n);
            }
            State::Columns(left) => {
                self.wires.push(column_definition(p)?);
                self.state = if left > 1 {
                    State::Columns(left - 1)
                } else {
                    State::ColumnsEof
                };
            }
            State::ColumnsEof => {
                if !is_eof(p) {
                    return Err("no EOF after the column definitions");
                }
                self.state = State::Rows;
            }
            State::Rows => {
                if is_eof(p) {
                    self.state = State::Done;
                } else {
                    if self.failed.is_none() {
                        if let Err(e) = self.row(r, p) {
                            self.failed = Some(e);
                        }
                    }
                    return Ok(true);
                }
            }
            State::Done => return Err("packet after the end of the result set"),
        }
        Ok(false)
    }

    fn row(&mut self, r: &TextRenderer, p: &[u8]) -> Result<(), Fail> {
        let img = &mut self.img;
        img.buf.clear();
        if self.binary {
            // 0x00, the NULL bitmap (its first two bits unused), then the values that are not NULL.
            let n = r.cols.len();
            let mut o = 1;
            let nulls = take(p, &mut o, (n + 9) / 8).map_err(|_| "truncated binary row")?;
            for (i, (col, &w)) in r.cols.iter().zip(&self.wires).enumerate() {
                let bit = i + 2;
                img.json_null[i] = false;
                if nulls[bit >> 3] & (1 << (bit & 7)) != 0 {
                    img.spans[i] = None;
                    continue;
                }
                let value = binary_value(p, &mut o, w)?;
                let start = img.buf.len();
                img.json_null[i] = col.json_null(&value);
                col.render(value, w.decimals as usize, &mut img.buf)?;
                img.spans[i] = Some((start, img.buf.len()));
            }
            if o != p.len() {
                return Err("a binary row longer than its columns");
            }
        } else {
            let mut values = row_values(p);
            for (i, col) in r.cols.iter().enumerate() {
                img.json_null[i] = false;
                match values.next().ok_or("too few values in a row")?? {
                    None => img.spans[i] = None,
                    Some(raw) => {
                        let start = img.buf.len();
                        img.json_null[i] = col.json_null(&Value::Bytes(raw));
                        col.render(Value::Bytes(raw), 0, &mut img.buf)?;
                        img.spans[i] = Some((start, img.buf.len()));
                    }
                }
            }
            if values.next().is_some() {
                return Err("too many values in a row");
            }
        }
        r.layout.mark(img, None, &mut self.out)?;
        r.layout.object(img, &mut self.out.data.data)?;
        self.out.data.end_value()?;
        r.layout.key(img, &mut self.out)?;
        self.out.rows += 1;
        Ok(())
    }
}

impl ResultReader {
    /// The last (binary) row's values as text: numbers in decimal, temporal values as the server prints them.
    fn binary_texts(&self) -> Result<Vec<Option<Vec<u8>>>, Fail> {
        let p = &self.last;
        let n = self.wires.len();
        let mut o = 1;
        let nulls = take(p, &mut o, (n + 9) / 8)?;
        let mut out = Vec::with_capacity(n);
        for (i, &w) in self.wires.iter().enumerate() {
            let bit = i + 2;
            if nulls[bit >> 3] & (1 << (bit & 7)) != 0 {
                out.push(None);
                continue;
            }
            let mut text = Vec::new();
            match binary_value(p, &mut o, w)? {
                Value::Bytes(b) => text.extend_from_slice(b),
                Value::Int(v) => push_int(&mut text, v),
                Value::Double(v) => push_double(&mut text, v),
                temporal => {
                    let quoted = TextCol {
                        kind: T_QUOTED,
                        members: Vec::new(),
                        blob: None,
                    };
                    quoted.render(temporal, w.decimals as usize, &mut text)?;
                    text = text[1..text.len() - 1].to_vec();
                }
            }
            out.push(Some(text));
        }
        Ok(out)
    }
}

#[pymethods]
impl ResultReader {
    /// binary: the result set of a prepared statement (COM_STMT_EXECUTE), else of a plain query.
    /// rows: how many rows the result set may hold, to size its buffers (0: unknown).
    #[new]
    #[pyo3(signature = (renderer, binary=false, rows=0))]
    fn new(renderer: Py<TextRenderer>, binary: bool, rows: usize) -> Self {
        let n = renderer.get().cols.len();
        let row_bytes = renderer
            .get()
            .row_bytes
            .load(std::sync::atomic::Ordering::Relaxed);
        ResultReader {
            hint: rows,
            renderer,
            binary,
            wires: Vec::with_capacity(n),
            state: State::Count,
            pending: Vec::new(),
            joined: Vec::new(),
            img: Image::new(n),
            out: sized(rows, row_bytes),
            last: Vec::new(),
            failed: None,
            server_error: None,
        }
    }

    /// Take the next bytes read from the connection; True once the result set has ended.
    /// ValueError when they are not a text-protocol result set of the table's columns.
    fn feed(&mut self, py: Python<'_>, data: &[u8]) -> PyResult<bool> {
        let renderer = self.renderer.clone_ref(py);
        py.detach(|| {
            let r = renderer.get();
            let mut data = data;
            if !self.pending.is_empty() {
                // The packet the last read cut: only its missing bytes are copied to it.
                let mut pending = std::mem::take(&mut self.pending);
                let head = (4usize.saturating_sub(pending.len())).min(data.len());
                pending.extend_from_slice(&data[..head]);
                data = &data[head..];
                if pending.len() >= 4 {
                    let len = pending[0] as usize
                        | (pending[1] as usize) << 8
                        | (pending[2] as usize) << 16;
                    let rest = (4 + len - pending.len()).min(data.len());
                    pending.extend_from_slice(&data[..rest]);
                    data = &data[rest..];
                    if pending.len() == 4 + len {
                        let used = self.packets(r, &pending)?;
                        debug_assert_eq!(used, pending.len());
                        pending.clear();
                    }
                }
                if !pending.is_empty() {
                    self.pending = pending; // still cut: `data` is used up
                    return Ok(self.state == State::Done);
                }
                self.pending = pending; // empty, its room kept
            }
            let used = self.packets(r, data)?;
            self.pending.extend_from_slice(&data[used..]);
            Ok(self.state == State::Done)
        })
        .map_err(|e: Fail| PyValueError::new_err(format!("snapshot result set: {e}")))
    }

    /// Rows rendered and not yet taken.
    #[getter]
    fn rows(&self) -> usize {
        self.out.rows
    }

    /// The error packet's payload when the server ended the result set with an error, else None.
    fn server_error<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.server_error.as_ref().map(|p| PyBytes::new(py, p))
    }

    /// The rows rendered so far as Arrow string columns, (rows, data, pk, pk_hash, json_null), each (values
    /// bytes, int32 little-endian offsets bytes), `pk` and `pk_hash` None without a primary key, `json_null`
    /// as `RowRenderer.render`'s;
    /// the reader starts a new batch. ValueError when a value could not be rendered.
    fn take<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        if let Some(e) = self.failed {
            return Err(PyValueError::new_err(e));
        }
        let renderer = self.renderer.get();
        if self.out.rows > 0 {
            let per_row = self.out.data.data.len() / self.out.rows;
            renderer
                .row_bytes
                .store(per_row, std::sync::atomic::Ordering::Relaxed);
        }
        let next = if self.state == State::Done {
            empty()
        } else {
            sized(
                self.hint.saturating_sub(self.out.rows),
                renderer
                    .row_bytes
                    .load(std::sync::atomic::Ordering::Relaxed),
            )
        };
        let r = std::mem::replace(&mut self.out, next);
        let keyed = !renderer.layout.pk.is_empty();
        Ok((
            r.rows,
            py_column(py, r.data, true)?,
            py_column(py, r.pk, keyed)?,
            py_column(py, r.hash, keyed && renderer.layout.hash_prefix.is_some())?,
            py_marks(py, r.json_null)?,
        )
            .into_pyobject(py)?
            .into_any())
    }

    /// The last row's raw values (None for NULL), or None before the first row.
    /// The last row's values as the text protocol sends them (None for NULL), or None before the
    /// first row: the key the next chunk starts after.
    fn last_row<'py>(&self, py: Python<'py>) -> PyResult<Option<Vec<Option<Bound<'py, PyBytes>>>>> {
        if self.last.is_empty() {
            return Ok(None);
        }
        let texts = if self.binary {
            self.binary_texts()
        } else {
            row_values(&self.last)
                .map(|v| v.map(|b| b.map(<[u8]>::to_vec)))
                .collect()
        };
        let texts = texts.map_err(PyValueError::new_err)?;
        Ok(Some(
            texts
                .iter()
                .map(|v| v.as_ref().map(|b| PyBytes::new(py, b)))
                .collect(),
        ))
    }
}
