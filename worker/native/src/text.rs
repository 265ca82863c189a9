//! The snapshot's compiled path: a chunk's result set, read straight off the wire, to Arrow columns.
//!
//! The worker sends a chunk's `SELECT` on its PyMySQL connection and hands the socket's bytes, as
//! they arrive, to a `ResultReader`: it walks the text-protocol result set (column count, column
//! definitions, EOF, one packet per row, EOF) and renders each row as it completes, with the same
//! `Layout` as the binlog renderer. No Python object is made per row or per value. Values come as
//! the server prints them (`character_set_results = NULL`, UTC): numbers and dates as text, strings
//! and bytes as their raw bytes in the column's charset, BIT as its big-endian bytes.
//!
//! Text column kinds (mirrored by mysqlcapture_worker.snapshot.fast).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::{
    push_base64, push_double, push_escaped, push_int, py_column, Column, Fail, Image, Layout,
    Rendered,
};

const T_INT: u8 = 0; // decimal digits (INT*, YEAR): leading zeros (ZEROFILL) dropped
const T_VERBATIM: u8 = 1; // DECIMAL: the server's text as it is
const T_DOUBLE: u8 = 2;
const T_BIT1: u8 = 3; // BIT(1): its byte, as a boolean
const T_QUOTED: u8 = 4; // DATE, TIME, DATETIME, TIMESTAMP: the server's ASCII text, quoted
const T_UTF8: u8 = 5; // UTF-8 text
const T_BYTE_TABLE: u8 = 6; // single-byte-charset text; members: 256 escaped fragments
const T_BASE64: u8 = 7; // binary bytes
const T_SET_UTF8: u8 = 8; // a SET's members joined by `,`, UTF-8
const T_SET_BYTE_TABLE: u8 = 9; // the same, single-byte charset; members: 256 escaped fragments
const T_BITS: u8 = 10; // BIT(n > 1): big-endian bytes, as a number

struct TextCol {
    kind: u8,
    members: Vec<Vec<u8>>,
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

impl TextCol {
    /// Render one value (not NULL) into `out`.
    fn render(&self, raw: &[u8], out: &mut Vec<u8>) -> Result<(), Fail> {
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
                out.extend_from_slice(raw);
            }
            T_DOUBLE => {
                let text = std::str::from_utf8(raw).map_err(|_| "bad DOUBLE")?;
                if !text
                    .bytes()
                    .all(|c| c.is_ascii_digit() || b"+-.eE".contains(&c))
                {
                    return Err("bad DOUBLE");
                }
                push_double(out, text.parse::<f64>().map_err(|_| "bad DOUBLE")?);
            }
            T_BIT1 => out.extend_from_slice(if raw.iter().any(|c| *c != 0) {
                b"true"
            } else {
                b"false"
            }),
            T_BITS => {
                if raw.len() > 8 {
                    return Err("BIT value longer than 8 bytes");
                }
                push_int(out, raw.iter().fold(0u64, |v, c| v << 8 | *c as u64) as i128);
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
                    T_UTF8 => push_escaped(out, &String::from_utf8_lossy(raw)),
                    T_BYTE_TABLE => {
                        for &c in raw {
                            out.extend_from_slice(&self.members[c as usize]);
                        }
                    }
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
                        if self.kind == T_SET_UTF8 {
                            push_escaped(out, &String::from_utf8_lossy(m));
                        } else {
                            for &c in m {
                                out.extend_from_slice(&self.members[c as usize]);
                            }
                        }
                        out.push(b'"');
                    }
                }
                out.push(b']');
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
}

#[pymethods]
impl TextRenderer {
    /// columns: (kind, members) per column; keys, pk, hash_prefix as for `RowRenderer`.
    #[new]
    fn new(
        columns: Vec<(u8, Vec<String>)>,
        keys: Vec<String>,
        pk: Vec<usize>,
        hash_prefix: Vec<u8>,
    ) -> PyResult<Self> {
        if keys.len() != columns.len() || pk.iter().any(|i| *i >= columns.len()) {
            return Err(PyValueError::new_err(
                "keys and primary key must match the columns",
            ));
        }
        let mut cols = Vec::with_capacity(columns.len());
        for (kind, members) in columns {
            if kind > T_BITS {
                return Err(PyValueError::new_err(format!(
                    "bad text column kind {kind}"
                )));
            }
            if matches!(kind, T_BYTE_TABLE | T_SET_BYTE_TABLE) && members.len() != 256 {
                return Err(PyValueError::new_err("a byte table has 256 entries"));
            }
            cols.push(TextCol {
                kind,
                members: members.into_iter().map(String::into_bytes).collect(),
            });
        }
        Ok(TextRenderer {
            cols,
            layout: Layout::new(keys, pk, hash_prefix),
        })
    }
}

// ------------------------------------------------------------------------------------- the wire
const MAX_PAYLOAD: usize = 0xFF_FFFF; // a packet this long is continued by the next one

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
    Ok(Some(bytes.iter().rev().fold(0u64, |v, c| v << 8 | *c as u64)))
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
    state: State,
    pending: Vec<u8>, // received bytes of a packet not yet complete
    joined: Vec<u8>,  // a payload of several packets (16 MiB and more), being joined
    img: Image,
    out: Rendered,
    last: Vec<u8>, // the last row's packet: the key the next chunk starts after
    failed: Option<Fail>,
    server_error: Option<Vec<u8>>,
}

fn empty() -> Rendered {
    Rendered {
        rows: 0,
        data: Column::new(),
        old: Column::new(),
        pk: Column::new(),
        hash: Column::new(),
    }
}

impl ResultReader {
    /// Consume every complete packet of `src`; returns how many bytes were used.
    fn packets(&mut self, r: &TextRenderer, src: &[u8]) -> Result<usize, Fail> {
        let mut o = 0;
        while self.state != State::Done {
            let Some(head) = src.get(o..o + 4) else { break };
            let len = head[0] as usize | (head[1] as usize) << 8 | (head[2] as usize) << 16;
            let Some(payload) = src.get(o + 4..o + 4 + len) else { break };
            o += 4 + len;
            if len == MAX_PAYLOAD || !self.joined.is_empty() {
                self.joined.extend_from_slice(payload);
                if len == MAX_PAYLOAD {
                    continue;
                }
                let whole = std::mem::take(&mut self.joined);
                self.packet(r, &whole)?;
            } else {
                self.packet(r, payload)?;
            }
        }
        if self.state == State::Done && o < src.len() {
            return Err("bytes after the end of the result set");
        }
        Ok(o)
    }

    fn packet(&mut self, r: &TextRenderer, p: &[u8]) -> Result<(), Fail> {
        if p.first() == Some(&0xFF) && matches!(self.state, State::Count | State::Rows) {
            self.server_error = Some(p.to_vec());
            self.state = State::Done;
            return Ok(());
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
                } else if self.failed.is_none() {
                    if let Err(e) = self.row(r, p) {
                        self.failed = Some(e);
                    }
                }
            }
            State::Done => return Err("packet after the end of the result set"),
        }
        Ok(())
    }

    fn row(&mut self, r: &TextRenderer, p: &[u8]) -> Result<(), Fail> {
        let img = &mut self.img;
        img.buf.clear();
        let mut values = row_values(p);
        for (i, col) in r.cols.iter().enumerate() {
            match values.next().ok_or("too few values in a row")?? {
                None => img.spans[i] = None,
                Some(raw) => {
                    let start = img.buf.len();
                    col.render(raw, &mut img.buf)?;
                    img.spans[i] = Some((start, img.buf.len()));
                }
            }
        }
        if values.next().is_some() {
            return Err("too many values in a row");
        }
        r.layout.object(img, &mut self.out.data.data);
        self.out.data.end_value()?;
        r.layout.key(img, &mut self.out)?;
        self.out.rows += 1;
        self.last.clear();
        self.last.extend_from_slice(p);
        Ok(())
    }
}

#[pymethods]
impl ResultReader {
    #[new]
    fn new(renderer: Py<TextRenderer>) -> Self {
        let n = renderer.get().cols.len();
        ResultReader {
            renderer,
            state: State::Count,
            pending: Vec::new(),
            joined: Vec::new(),
            img: Image::new(n),
            out: empty(),
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
            let mut pending = std::mem::take(&mut self.pending);
            let src: &[u8] = if pending.is_empty() {
                data
            } else {
                pending.extend_from_slice(data);
                &pending
            };
            let used = self.packets(r, src)?;
            self.pending = src[used..].to_vec();
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

    /// The rows rendered so far as Arrow string columns, (rows, data, pk, pk_hash), each (values
    /// bytes, int32 little-endian offsets bytes), `pk` and `pk_hash` None without a primary key;
    /// the reader starts a new batch. ValueError when a value could not be rendered.
    fn take<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        if let Some(e) = self.failed {
            return Err(PyValueError::new_err(e));
        }
        let r = std::mem::replace(&mut self.out, empty());
        let keyed = !self.renderer.get().layout.pk.is_empty();
        Ok((
            r.rows,
            py_column(py, &r.data, true)?,
            py_column(py, &r.pk, keyed)?,
            py_column(py, &r.hash, keyed)?,
        )
            .into_pyobject(py)?
            .into_any())
    }

    /// The last row's raw values (None for NULL), or None before the first row.
    fn last_row<'py>(&self, py: Python<'py>) -> PyResult<Option<Vec<Option<Bound<'py, PyBytes>>>>> {
        if self.last.is_empty() {
            return Ok(None);
        }
        let mut values = Vec::new();
        for v in row_values(&self.last) {
            values.push(v.map_err(PyValueError::new_err)?.map(|b| PyBytes::new(py, b)));
        }
        Ok(Some(values))
    }
}
