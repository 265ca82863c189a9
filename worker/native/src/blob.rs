//! Length-prefixed values that need more than a table lookup: JSON (MariaDB's text, MySQL's binary
//! form, a MySQL snapshot's text), GEOMETRY, VECTOR and text in multi-byte charsets other than UTF-8.
//!
//! Each renders exactly as the reference path does (mysqlcapture_worker.decode): the common case in
//! Rust, and anything unusual (a double Java would print with an exponent inside JSON, an opaque JSON
//! value, bytes a charset does not map) through the column's fallback, the reference converter itself,
//! so both paths agree by construction.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::java::{push_escaped, push_java_double, push_java_float, push_plain};
use crate::Fail;

pub const B_JSON_TEXT: i64 = 0; // MariaDB's JSON: the text as it is (a line break made a space)
pub const B_JSON_REPARSE: i64 = 1; // JSON text MySQL's server printed: printed as its binary form would be
pub const B_JSON_BINARY: i64 = 2; // MySQL's binary JSON
pub const B_GEOMETRY: i64 = 3; // SRID + WKB, as JTS's WKT
pub const B_TABLE: i64 = 4; // a double-byte charset: 256 single-byte then 65536 two-byte fragments
pub const B_UTF16BE: i64 = 5; // ucs2, utf16
pub const B_UTF16LE: i64 = 6;
pub const B_UTF32BE: i64 = 7;
pub const B_VECTOR: i64 = 8; // little-endian float32 values
pub const B_LAST: i64 = 8;

/// Whether blob kind `kind` is a JSON column's (its `null` document is told apart from SQL NULL).
pub fn is_json(kind: i64) -> bool {
    matches!(kind, B_JSON_TEXT | B_JSON_REPARSE | B_JSON_BINARY)
}

/// Whether `raw`, a value of blob kind `kind`, is the JSON document `null`, as the reference converters see it
/// (`mysql_json.is_null_text`): a text `null` between JSON whitespace, after a UTF-8 byte-order mark if any;
/// MySQL's binary literal null, or an empty binary value (which MySQL reads as `null`). An empty text is not one
/// (MariaDB's JSON is a LONGTEXT that may hold it).
pub fn is_json_null(kind: i64, raw: &[u8]) -> bool {
    match kind {
        B_JSON_BINARY => raw.is_empty() || (raw.len() >= 2 && raw[0] == 0x04 && raw[1] == 0x00),
        B_JSON_TEXT | B_JSON_REPARSE => {
            let raw = raw.strip_prefix(b"\xef\xbb\xbf").unwrap_or(raw);
            let ws = |c: &u8| matches!(*c, b' ' | b'\t' | b'\n' | b'\r');
            let start = raw.iter().position(|c| !ws(c)).unwrap_or(raw.len());
            let end = raw.iter().rposition(|c| !ws(c)).map_or(start, |e| e + 1);
            &raw[start..end] == b"null"
        }
        _ => false,
    }
}

/// Marks a value the Rust side leaves to the fallback.
struct Unusual;

pub struct Blob {
    pub kind: i64,
    pub table: Vec<Vec<u8>>,
    pub fallback: Option<Py<PyAny>>,
}

impl Blob {
    pub fn checked(kind: i64, table: Vec<Vec<u8>>, fallback: Option<Py<PyAny>>) -> PyResult<Self> {
        if !(0..=B_LAST).contains(&kind) {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "bad blob kind {kind}"
            )));
        }
        if kind == B_TABLE && table.len() != 256 + 65536 {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "a charset table has 256 + 65536 entries",
            ));
        }
        Ok(Blob {
            kind,
            table,
            fallback,
        })
    }

    /// The JSON text of the value `raw` (without its length prefix) into `out`.
    pub fn render(&self, raw: &[u8], out: &mut Vec<u8>) -> Result<(), Fail> {
        let start = out.len();
        if self.fast(raw, out).is_ok() {
            return Ok(());
        }
        out.truncate(start);
        let fallback = self
            .fallback
            .as_ref()
            .ok_or("no fallback for an unusual value")?;
        Python::attach(|py| -> Result<(), Fail> {
            let text = fallback
                .call1(py, (PyBytes::new(py, raw),))
                .map_err(|_| "the reference converter refused the value")?;
            let text: String = text
                .extract(py)
                .map_err(|_| "the reference converter returned no text")?;
            out.extend_from_slice(text.as_bytes());
            Ok(())
        })
    }

    fn fast(&self, raw: &[u8], out: &mut Vec<u8>) -> Result<(), Unusual> {
        match self.kind {
            B_JSON_TEXT => json_text(raw, out),
            B_JSON_REPARSE => {
                if raw.is_empty() {
                    out.extend_from_slice(b"null");
                    return Ok(());
                }
                Parser::new(raw, Some(out)).document()
            }
            B_JSON_BINARY => {
                if raw.is_empty() {
                    out.extend_from_slice(b"null");
                    return Ok(());
                }
                binary_value(raw[0], raw, 1, out)
            }
            B_GEOMETRY => {
                if raw.len() < 4 {
                    return Err(Unusual);
                }
                out.push(b'"');
                let (_, off) = geometry(raw, 4, out)?;
                if off != raw.len() {
                    return Err(Unusual);
                }
                out.push(b'"');
                Ok(())
            }
            B_TABLE => {
                out.push(b'"');
                let mut i = 0;
                while i < raw.len() {
                    let single = &self.table[raw[i] as usize];
                    if !single.is_empty() {
                        out.extend_from_slice(single);
                        i += 1;
                        continue;
                    }
                    let pair = raw
                        .get(i + 1)
                        .map(|t| &self.table[256 + ((raw[i] as usize) << 8 | *t as usize)]);
                    match pair {
                        Some(p) if !p.is_empty() => out.extend_from_slice(p),
                        _ => return Err(Unusual),
                    }
                    i += 2;
                }
                out.push(b'"');
                Ok(())
            }
            B_UTF16BE | B_UTF16LE => {
                if raw.len() % 2 != 0 {
                    return Err(Unusual);
                }
                let units = raw.chunks_exact(2).map(|c| {
                    if self.kind == B_UTF16BE {
                        u16::from_be_bytes([c[0], c[1]])
                    } else {
                        u16::from_le_bytes([c[0], c[1]])
                    }
                });
                let text: String = char::decode_utf16(units)
                    .collect::<Result<_, _>>()
                    .map_err(|_| Unusual)?;
                out.push(b'"');
                push_escaped(out, &text, true);
                out.push(b'"');
                Ok(())
            }
            B_UTF32BE => {
                if raw.len() % 4 != 0 {
                    return Err(Unusual);
                }
                let mut text = String::with_capacity(raw.len() / 2);
                for c in raw.chunks_exact(4) {
                    text.push(
                        char::from_u32(u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
                            .ok_or(Unusual)?,
                    );
                }
                out.push(b'"');
                push_escaped(out, &text, true);
                out.push(b'"');
                Ok(())
            }
            B_VECTOR => {
                if raw.len() % 4 != 0 {
                    return Err(Unusual);
                }
                out.push(b'[');
                for (i, c) in raw.chunks_exact(4).enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    push_java_float(out, f32::from_le_bytes([c[0], c[1], c[2], c[3]]));
                }
                out.push(b']');
                Ok(())
            }
            _ => Err(Unusual),
        }
    }
}

// ------------------------------------------------------------------------------------------ JSON text

/// MariaDB's JSON: the stored text, its line breaks (whitespace, in valid JSON) made spaces.
fn json_text(raw: &[u8], out: &mut Vec<u8>) -> Result<(), Unusual> {
    if raw.is_empty() {
        out.extend_from_slice(b"null");
        return Ok(());
    }
    Parser::new(raw, None).document()?;
    if raw.trim_ascii() == b"null" {
        out.extend_from_slice(b"null"); // a JSON null is the reference path's None
        return Ok(());
    }
    out.extend(
        raw.iter()
            .map(|c| if *c == b'\n' || *c == b'\r' { b' ' } else { *c }),
    );
    Ok(())
}

/// A JSON text reader that accepts a subset of what Python's `json.loads` accepts (no NaN, no lone
/// surrogates, no duplicate keys, integers within 64 bits, doubles Java prints without an exponent)
/// and, given an output, writes the document compact as the reference path does.
struct Parser<'a, 'o> {
    s: &'a [u8],
    i: usize,
    out: Option<&'o mut Vec<u8>>,
    depth: usize,
}

impl<'a, 'o> Parser<'a, 'o> {
    fn new(s: &'a [u8], out: Option<&'o mut Vec<u8>>) -> Self {
        Parser {
            s,
            i: 0,
            out,
            depth: 0,
        }
    }

    fn emit(&mut self, bytes: &[u8]) {
        if let Some(o) = self.out.as_mut() {
            o.extend_from_slice(bytes);
        }
    }

    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn document(&mut self) -> Result<(), Unusual> {
        self.value()?;
        self.ws();
        if self.i == self.s.len() {
            Ok(())
        } else {
            Err(Unusual)
        }
    }

    fn value(&mut self) -> Result<(), Unusual> {
        self.ws();
        self.depth += 1;
        if self.depth > 500 {
            return Err(Unusual);
        }
        let c = *self.s.get(self.i).ok_or(Unusual)?;
        let r = match c {
            b'{' => self.object(),
            b'[' => self.array(),
            b'"' => {
                let text = self.string()?;
                if let Some(o) = self.out.as_mut() {
                    o.push(b'"');
                    push_escaped(o, &text, false);
                    o.push(b'"');
                }
                Ok(())
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number(),
        };
        self.depth -= 1;
        r
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), Unusual> {
        if self.s[self.i..].starts_with(word) {
            self.i += word.len();
            self.emit(word);
            Ok(())
        } else {
            Err(Unusual)
        }
    }

    fn object(&mut self) -> Result<(), Unusual> {
        self.i += 1;
        self.emit(b"{");
        let mut keys: Vec<std::borrow::Cow<'a, str>> = Vec::new();
        if self.empty(b'}') {
            return Ok(());
        }
        loop {
            self.ws();
            if self.s.get(self.i) != Some(&b'"') {
                return Err(Unusual);
            }
            let key = self.string()?;
            if keys.contains(&key) {
                return Err(Unusual); // Python keeps the last value at the first key's place
            }
            self.emit(b"\"");
            if let Some(o) = self.out.as_mut() {
                push_escaped(o, &key, false);
            }
            self.emit(b"\":");
            keys.push(key);
            self.ws();
            if self.s.get(self.i) != Some(&b':') {
                return Err(Unusual);
            }
            self.i += 1;
            self.value()?;
            if self.separator(b'}')? {
                return Ok(());
            }
        }
    }

    fn array(&mut self) -> Result<(), Unusual> {
        self.i += 1;
        self.emit(b"[");
        if self.empty(b']') {
            return Ok(());
        }
        loop {
            self.value()?;
            if self.separator(b']')? {
                return Ok(());
            }
        }
    }

    /// An empty container: its `close` right after the opening (consumed and written).
    fn empty(&mut self, close: u8) -> bool {
        self.ws();
        if self.s.get(self.i) != Some(&close) {
            return false;
        }
        self.i += 1;
        self.emit(&[close]);
        true
    }

    /// After a member or an element: ',' (false: more follow) or `close` (true: the container ends).
    fn separator(&mut self, close: u8) -> Result<bool, Unusual> {
        self.ws();
        match self.s.get(self.i) {
            Some(b',') => {
                self.i += 1;
                self.emit(b",");
                Ok(false)
            }
            Some(c) if *c == close => {
                self.i += 1;
                self.emit(&[close]);
                Ok(true)
            }
            _ => Err(Unusual),
        }
    }

    fn hex4(&mut self) -> Result<u32, Unusual> {
        let h = self.s.get(self.i..self.i + 4).ok_or(Unusual)?;
        let h = std::str::from_utf8(h).map_err(|_| Unusual)?;
        let v = u32::from_str_radix(h, 16).map_err(|_| Unusual)?;
        self.i += 4;
        Ok(v)
    }

    /// A string's text: borrowed when it has no escape (the common case), decoded when it has.
    fn string(&mut self) -> Result<std::borrow::Cow<'a, str>, Unusual> {
        self.i += 1;
        let s: &'a [u8] = self.s;
        let start = self.i;
        let mut j = start;
        while j < s.len() && s[j] != b'"' && s[j] != b'\\' && s[j] >= 0x20 {
            j += 1;
        }
        if j < s.len() && s[j] == b'"' {
            self.i = j + 1;
            let text = std::str::from_utf8(&s[start..j]).map_err(|_| Unusual)?;
            return Ok(std::borrow::Cow::Borrowed(text));
        }
        let mut text: Vec<u8> = Vec::new();
        loop {
            let c = *self.s.get(self.i).ok_or(Unusual)?;
            self.i += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    let e = *self.s.get(self.i).ok_or(Unusual)?;
                    self.i += 1;
                    match e {
                        b'"' => text.push(b'"'),
                        b'\\' => text.push(b'\\'),
                        b'/' => text.push(b'/'),
                        b'b' => text.push(8),
                        b'f' => text.push(12),
                        b'n' => text.push(b'\n'),
                        b'r' => text.push(b'\r'),
                        b't' => text.push(b'\t'),
                        b'u' => {
                            let mut u = self.hex4()?;
                            if (0xD800..0xDC00).contains(&u) {
                                if self.s.get(self.i..self.i + 2) != Some(b"\\u") {
                                    return Err(Unusual);
                                }
                                self.i += 2;
                                let low = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&low) {
                                    return Err(Unusual);
                                }
                                u = 0x10000 + ((u - 0xD800) << 10) + (low - 0xDC00);
                            } else if (0xDC00..0xE000).contains(&u) {
                                return Err(Unusual);
                            }
                            let ch = char::from_u32(u).ok_or(Unusual)?;
                            let mut b = [0u8; 4];
                            text.extend_from_slice(ch.encode_utf8(&mut b).as_bytes());
                        }
                        _ => return Err(Unusual),
                    }
                }
                0..=0x1F => return Err(Unusual),
                _ => text.push(c),
            }
        }
        String::from_utf8(text)
            .map(std::borrow::Cow::Owned)
            .map_err(|_| Unusual)
    }

    fn number(&mut self) -> Result<(), Unusual> {
        let start = self.i;
        let s = self.s;
        let mut i = self.i;
        if s.get(i) == Some(&b'-') {
            i += 1;
        }
        match s.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                while matches!(s.get(i), Some(b'0'..=b'9')) {
                    i += 1;
                }
            }
            _ => return Err(Unusual),
        }
        let mut float = false;
        if s.get(i) == Some(&b'.') {
            float = true;
            i += 1;
            if !matches!(s.get(i), Some(b'0'..=b'9')) {
                return Err(Unusual);
            }
            while matches!(s.get(i), Some(b'0'..=b'9')) {
                i += 1;
            }
        }
        if matches!(s.get(i), Some(b'e' | b'E')) {
            float = true;
            i += 1;
            if matches!(s.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            if !matches!(s.get(i), Some(b'0'..=b'9')) {
                return Err(Unusual);
            }
            while matches!(s.get(i), Some(b'0'..=b'9')) {
                i += 1;
            }
        }
        self.i = i;
        let text = std::str::from_utf8(&s[start..i]).map_err(|_| Unusual)?;
        if self.out.is_none() {
            return Ok(());
        }
        if float {
            let v: f64 = text.parse().map_err(|_| Unusual)?;
            json_double(self.out.as_mut().expect("output"), v)
        } else {
            // Python's int, then orjson: 64-bit values only, "-0" is 0.
            let mut buf = Vec::with_capacity(24);
            if let Ok(v) = text.parse::<i64>() {
                crate::push_int(&mut buf, v as i128);
            } else if let Ok(v) = text.parse::<u64>() {
                crate::push_int(&mut buf, v as i128);
            } else {
                return Err(Unusual);
            }
            self.emit(&buf);
            Ok(())
        }
    }
}

/// A double inside JSON: Java's text when it has no exponent; the exact expansion Maxwell prints
/// otherwise is left to the fallback.
fn json_double(out: &mut Vec<u8>, v: f64) -> Result<(), Unusual> {
    let m = v.abs();
    if !(m == 0.0 || (1e-3..1e7).contains(&m)) {
        return Err(Unusual);
    }
    push_java_double(out, v);
    Ok(())
}

// ---------------------------------------------------------------------------------------- binary JSON

fn u16_at(b: &[u8], o: usize) -> Result<usize, Unusual> {
    b.get(o..o + 2)
        .map(|x| u16::from_le_bytes([x[0], x[1]]) as usize)
        .ok_or(Unusual)
}

fn u32_at(b: &[u8], o: usize) -> Result<usize, Unusual> {
    b.get(o..o + 4)
        .map(|x| u32::from_le_bytes([x[0], x[1], x[2], x[3]]) as usize)
        .ok_or(Unusual)
}

fn varlen(b: &[u8], mut o: usize) -> Result<(usize, usize), Unusual> {
    let mut value = 0usize;
    for k in 0..5 {
        let byte = *b.get(o).ok_or(Unusual)?;
        o += 1;
        value |= ((byte & 0x7F) as usize) << (7 * k);
        if byte & 0x80 == 0 {
            return Ok((value, o));
        }
    }
    Err(Unusual)
}

fn utf8_at(b: &[u8], start: usize, len: usize) -> Result<&str, Unusual> {
    std::str::from_utf8(b.get(start..start + len).ok_or(Unusual)?).map_err(|_| Unusual)
}

fn binary_value(kind: u8, b: &[u8], off: usize, out: &mut Vec<u8>) -> Result<(), Unusual> {
    match kind {
        0x0..=0x3 => container(b, off, kind == 0x0 || kind == 0x2, kind <= 0x1, out),
        0x4 => literal(*b.get(off).ok_or(Unusual)?, out),
        0x5..=0xA => {
            // int16, uint16, int32, uint32, int64, uint64: little-endian, 2, 4 or 8 bytes
            let width = 2usize << ((kind - 0x5) / 2);
            let raw = b.get(off..off + width).ok_or(Unusual)?;
            let u = raw.iter().rev().fold(0u64, |acc, &x| (acc << 8) | x as u64);
            let signed = (kind - 0x5) % 2 == 0;
            let bits = 8 * width as u32;
            let v = if signed && u >> (bits - 1) & 1 == 1 {
                u as i128 - (1i128 << bits)
            } else {
                u as i128
            };
            crate::push_int(out, v);
            Ok(())
        }
        0xB => {
            let raw: [u8; 8] = b
                .get(off..off + 8)
                .ok_or(Unusual)?
                .try_into()
                .map_err(|_| Unusual)?;
            json_double(out, f64::from_le_bytes(raw))
        }
        0xC => {
            let (len, start) = varlen(b, off)?;
            out.push(b'"');
            push_escaped(out, utf8_at(b, start, len)?, false);
            out.push(b'"');
            Ok(())
        }
        0xF => {
            let field_type = *b.get(off).ok_or(Unusual)?;
            let (len, start) = varlen(b, off + 1)?;
            let data = b.get(start..start + len).ok_or(Unusual)?;
            match field_type {
                // DECIMAL: precision, scale, then MySQL's binary decimal, printed as written
                246 if data.len() >= 2 => {
                    let (p, s) = (data[0] as usize, data[1] as usize);
                    if p == 0 || p > 65 || s > p || data.len() != 2 + crate::decimal_size(p, s) {
                        return Err(Unusual);
                    }
                    crate::push_decimal(out, &data[2..], p, s).map_err(|_| Unusual)
                }
                7 | 10 | 11 | 12 | 17 | 18 | 19 => Err(Unusual), // temporal values: the fallback
                _ => {
                    out.push(b'"');
                    crate::push_base64(out, data, 0);
                    out.push(b'"');
                    Ok(())
                }
            }
        }
        _ => Err(Unusual),
    }
}

fn literal(code: u8, out: &mut Vec<u8>) -> Result<(), Unusual> {
    out.extend_from_slice(match code {
        0 => b"null",
        1 => b"true",
        2 => b"false",
        _ => return Err(Unusual),
    });
    Ok(())
}

fn container(
    b: &[u8],
    base: usize,
    small: bool,
    is_object: bool,
    out: &mut Vec<u8>,
) -> Result<(), Unusual> {
    let width = if small { 2 } else { 4 };
    let read = |o: usize| if small { u16_at(b, o) } else { u32_at(b, o) };
    let count = read(base)?;
    let mut pos = base + 2 * width;
    let key_at = pos;
    if is_object {
        pos += count * (width + 2);
    }
    out.push(if is_object { b'{' } else { b'[' });
    for j in 0..count {
        if j > 0 {
            out.push(b',');
        }
        if is_object {
            let entry = key_at + j * (width + 2);
            let key_off = read(entry)?;
            let key_len = u16_at(b, entry + width)?;
            out.push(b'"');
            push_escaped(out, utf8_at(b, base + key_off, key_len)?, false);
            out.extend_from_slice(b"\":");
        }
        let kind = *b.get(pos).ok_or(Unusual)?;
        let inline = matches!(kind, 0x4..=0x6) || (!small && matches!(kind, 0x7 | 0x8));
        if inline {
            binary_value(kind, b, pos + 1, out)?;
        } else {
            let value_off = read(pos + 1)?;
            binary_value(kind, b, base + value_off, out)?;
        }
        pos += 1 + width;
    }
    out.push(if is_object { b'}' } else { b']' });
    Ok(())
}

// ------------------------------------------------------------------------------------------- GEOMETRY

const GEOMETRY_NAMES: [&[u8]; 8] = [
    b"",
    b"POINT",
    b"LINESTRING",
    b"POLYGON",
    b"MULTIPOINT",
    b"MULTILINESTRING",
    b"MULTIPOLYGON",
    b"GEOMETRYCOLLECTION",
];

fn points(
    b: &[u8],
    mut off: usize,
    little: bool,
    count: usize,
    out: &mut Vec<u8>,
) -> Result<usize, Unusual> {
    for k in 0..count {
        if k > 0 {
            out.extend_from_slice(b", ");
        }
        for axis in 0..2 {
            if axis > 0 {
                out.push(b' ');
            }
            let raw: [u8; 8] = b
                .get(off..off + 8)
                .ok_or(Unusual)?
                .try_into()
                .map_err(|_| Unusual)?;
            let v = if little {
                f64::from_le_bytes(raw)
            } else {
                f64::from_be_bytes(raw)
            };
            if !push_plain(out, v) {
                return Err(Unusual);
            }
            off += 8;
        }
    }
    Ok(off)
}

/// WKT of the WKB geometry at `off` laid out as JTS 1.13 writes it; returns (type, next offset).
fn geometry(b: &[u8], off: usize, out: &mut Vec<u8>) -> Result<(usize, usize), Unusual> {
    let little = *b.get(off).ok_or(Unusual)? == 1;
    let raw: [u8; 4] = b
        .get(off + 1..off + 5)
        .ok_or(Unusual)?
        .try_into()
        .map_err(|_| Unusual)?;
    let kind = if little {
        u32::from_le_bytes(raw)
    } else {
        u32::from_be_bytes(raw)
    } as usize;
    if !(1..=7).contains(&kind) {
        return Err(Unusual);
    }
    let mut off = off + 5;
    out.extend_from_slice(GEOMETRY_NAMES[kind]);
    if kind == 1 {
        out.extend_from_slice(b" (");
        off = points(b, off, little, 1, out)?;
        out.push(b')');
        return Ok((kind, off));
    }
    let raw: [u8; 4] = b
        .get(off..off + 4)
        .ok_or(Unusual)?
        .try_into()
        .map_err(|_| Unusual)?;
    let count = if little {
        u32::from_le_bytes(raw)
    } else {
        u32::from_be_bytes(raw)
    } as usize;
    off += 4;
    if count == 0 {
        out.extend_from_slice(b" EMPTY");
        return Ok((kind, off));
    }
    out.extend_from_slice(b" (");
    for j in 0..count {
        if j > 0 {
            out.extend_from_slice(b", ");
        }
        match kind {
            2 => {
                off = points(b, off, little, count, out)?;
                break;
            }
            3 => {
                let raw: [u8; 4] = b
                    .get(off..off + 4)
                    .ok_or(Unusual)?
                    .try_into()
                    .map_err(|_| Unusual)?;
                let n = if little {
                    u32::from_le_bytes(raw)
                } else {
                    u32::from_be_bytes(raw)
                } as usize;
                out.push(b'(');
                off = points(b, off + 4, little, n, out)?;
                out.push(b')');
            }
            7 => {
                off = geometry(b, off, out)?.1;
            }
            _ => {
                // MULTI*: each part's body without its type name, "MULTIPOINT ((1 1), (2 2))".
                let mut part = Vec::new();
                let (sub, next) = geometry(b, off, &mut part)?;
                let name_len = GEOMETRY_NAMES[sub].len();
                out.extend_from_slice(&part[name_len + 1..]);
                off = next;
            }
        }
    }
    out.push(b')');
    Ok((kind, off))
}
