//! The worker's compiled fast path: rows-event bodies straight to Maxwell's JSON text.
//!
//! A `RowRenderer` is built once per TABLE_MAP from a column plan that Python resolves
//! (`mysqlcapture_worker.decode.native`); it reads full row images only and renders, per row, the
//! `data` object, the `old` object of an UPDATE, the primary key array and its hash, exactly as the
//! reference path (per-column Python converters, then orjson) does. Any byte it cannot account for
//! raises `ValueError`: the caller then decodes the event on the reference path, which says what
//! is wrong in its own words.

use blake2::digest::{Update, VariableOutput};
use blake2::Blake2bVar;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::sync::Arc;

mod blob;
mod java;
mod join;
mod kafka;
mod maxwell;
mod redact;
mod text;

// Column kinds (mirrored by mysqlcapture_worker.decode.native).
const K_INT: u8 = 0; // a = width in bytes (1, 2, 3, 4, 8), b = 1 when signed
const K_DOUBLE: u8 = 1;
const K_DECIMAL: u8 = 2; // a = precision, b = scale
const K_DATE: u8 = 3;
const K_DATETIME2: u8 = 4; // a = fsp
const K_TIMESTAMP2: u8 = 5; // a = fsp
const K_TIME2: u8 = 6; // a = fsp
const K_YEAR: u8 = 7;
const K_ENUM: u8 = 8; // a = bytes; members: JSON strings, index 0 is ""
const K_SET: u8 = 9; // a = bytes; members: JSON strings
const K_UTF8: u8 = 10; // a = length-prefix bytes
const K_BYTE_TABLE: u8 = 11; // a = length-prefix bytes; members: 256 escaped fragments, one per byte
const K_BASE64: u8 = 12; // a = length-prefix bytes, b = width to pad to with 0x00 (BINARY(N)), 0 for none
const K_BIT: u8 = 13; // a = bits
const K_FLOAT: u8 = 14;
const K_BLOB: u8 = 15; // a = length-prefix bytes, b = blob kind (blob.rs); members: a charset's table

struct Col {
    kind: u8,
    a: usize,
    b: i64,
    members: Vec<Vec<u8>>,
    frac_scale: u64,
    blob: Option<blob::Blob>,
}

#[pyclass(frozen)]
struct RowRenderer {
    cols: Vec<Col>,
    layout: Layout,
}

/// How a row's rendered values become text: the `data` object's keys, the primary key and its hash.
/// Shared by the binlog renderer and the snapshot's text renderer.
struct Layout {
    keys: Vec<Vec<u8>>, // `"name":` per column
    pk: Vec<usize>,
    hash_prefix: Option<Vec<u8>>, // database \0 table \0; None: no key hashes (a sink without pk_hash)
    // spec.columns: the table's rules and each column's rule among them (None: the column as it is).
    rules: Option<(Arc<redact::Rules>, Vec<Option<usize>>)>,
    // Per column: a JSON column, whose document `null` is marked apart from SQL NULL (`Marks`). Empty: none.
    json: Vec<bool>,
}

type Fail = &'static str;

const FRAC_SCALE: [u64; 7] = [1, 10000, 10000, 100, 100, 1, 1];
static D2: [[u8; 2]; 100] = {
    let mut t = [[0u8; 2]; 100];
    let mut i = 0;
    while i < 100 {
        t[i] = [b'0' + (i / 10) as u8, b'0' + (i % 10) as u8];
        i += 1;
    }
    t
};

fn fsp_bytes(fsp: usize) -> usize {
    fsp.div_ceil(2)
}

fn take<'a>(b: &'a [u8], o: &mut usize, n: usize) -> Result<&'a [u8], Fail> {
    let end = o.checked_add(n).ok_or("overflow")?;
    if end > b.len() {
        return Err("truncated row image");
    }
    let s = &b[*o..end];
    *o = end;
    Ok(s)
}

fn be(raw: &[u8]) -> u64 {
    raw.iter().fold(0u64, |acc, &x| (acc << 8) | x as u64)
}

fn le(raw: &[u8]) -> u64 {
    raw.iter().rev().fold(0u64, |acc, &x| (acc << 8) | x as u64)
}

fn push_int(out: &mut Vec<u8>, v: i128) {
    let mut buf = [0u8; 40];
    let mut i = buf.len();
    let neg = v < 0;
    let mut u = v.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (u % 10) as u8;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    if neg {
        i -= 1;
        buf[i] = b'-';
    }
    out.extend_from_slice(&buf[i..]);
}

fn push_d2(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&D2[(v % 100) as usize]);
}

fn push_year(out: &mut Vec<u8>, y: i64) {
    if (0..10000).contains(&y) {
        push_d2(out, (y / 100) as u64);
        push_d2(out, (y % 100) as u64);
    } else {
        push_int(out, y as i128);
    }
}

fn push_fraction(out: &mut Vec<u8>, micro: u64, fsp: usize) -> Result<(), Fail> {
    if micro >= 1_000_000 {
        return Err("fraction out of range");
    }
    let digits = [
        (micro / 100000) % 10,
        (micro / 10000) % 10,
        (micro / 1000) % 10,
        (micro / 100) % 10,
        (micro / 10) % 10,
        micro % 10,
    ];
    out.push(b'.');
    for d in &digits[..fsp] {
        out.push(b'0' + *d as u8);
    }
    Ok(())
}

/// A DOUBLE as Maxwell prints it (Java's `Double.toString`).
fn push_double(out: &mut Vec<u8>, v: f64) {
    java::push_java_double(out, v);
}

const DIG2BYTES: [usize; 10] = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4];
const POW10: [u64; 10] = [
    1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000,
];

fn decimal_size(precision: usize, scale: usize) -> usize {
    let intg = precision - scale;
    (intg / 9) * 4 + DIG2BYTES[intg % 9] + (scale / 9) * 4 + DIG2BYTES[scale % 9]
}

/// MySQL's binary DECIMAL: groups of up to 9 digits in big-endian bytes, the sign in the top bit.
/// Written without allocating: the digits go to a stack buffer (65 digits at most).
fn push_decimal(out: &mut Vec<u8>, raw: &[u8], precision: usize, scale: usize) -> Result<(), Fail> {
    let intg = precision - scale;
    if raw.is_empty() || precision > 65 {
        return Err("bad DECIMAL");
    }
    let negative = raw[0] & 0x80 == 0;
    let mask: u8 = if negative { 0xFF } else { 0 };
    // The byte at `i` with the sign bit flipped back and, for a negative value, every bit inverted.
    let byte =
        |i: usize| -> u64 { ((raw[i] ^ mask ^ if i == 0 { 0x80 } else { 0 }) as u64) & 0xFF };
    let mut digits = [0u8; 72];
    let mut n = 0usize;
    let mut off = 0usize;
    let mut group =
        |count: usize, nbytes: usize, n: &mut usize, off: &mut usize| -> Result<(), Fail> {
            if nbytes == 0 {
                return Ok(());
            }
            if *off + nbytes > raw.len() {
                return Err("truncated DECIMAL");
            }
            let mut value = 0u64;
            for i in *off..*off + nbytes {
                value = (value << 8) | byte(i);
            }
            *off += nbytes;
            if value >= POW10[count] {
                return Err("decimal group out of range");
            }
            for k in (0..count).rev() {
                digits[*n + k] = b'0' + (value % 10) as u8;
                value /= 10;
            }
            *n += count;
            Ok(())
        };
    group(intg % 9, DIG2BYTES[intg % 9], &mut n, &mut off)?;
    for _ in 0..intg / 9 {
        group(9, 4, &mut n, &mut off)?;
    }
    let int_digits = n;
    for _ in 0..scale / 9 {
        group(9, 4, &mut n, &mut off)?;
    }
    group(scale % 9, DIG2BYTES[scale % 9], &mut n, &mut off)?;
    let digits = &digits[..n];
    let first = digits[..int_digits]
        .iter()
        .position(|c| *c != b'0')
        .unwrap_or(int_digits);
    let zero = digits.iter().all(|c| *c == b'0');
    if negative && !zero {
        out.push(b'-');
    }
    if first == int_digits {
        out.push(b'0');
    } else {
        out.extend_from_slice(&digits[first..int_digits]);
    }
    if scale > 0 {
        out.push(b'.');
        out.extend_from_slice(&digits[int_digits..]);
    }
    Ok(())
}

fn push_ymd(out: &mut Vec<u8>, year: i64, month: u64, day: u64) {
    push_year(out, year);
    out.push(b'-');
    push_d2(out, month);
    out.push(b'-');
    push_d2(out, day);
}

fn push_hms(out: &mut Vec<u8>, h: u64, m: u64, s: u64) {
    push_d2(out, h);
    out.push(b':');
    push_d2(out, m);
    out.push(b':');
    push_d2(out, s);
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's civil_from_days).
fn civil_from_days(z: i64) -> (i64, u64, u64) {
    let z = z + 719468;
    let era = z.div_euclid(146097);
    let doe = z.rem_euclid(146097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u64;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u64;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// A string's bytes as the inside of a JSON string: UTF-8 (invalid bytes replaced, as Python's decode
/// with "replace" does) escaped as Maxwell's Jackson escapes, or a single-byte charset through its table
/// of 256 escaped fragments.
fn push_text(out: &mut Vec<u8>, raw: &[u8], byte_table: Option<&[Vec<u8>]>) {
    match byte_table {
        None => java::push_escaped(out, &String::from_utf8_lossy(raw), true),
        Some(table) => {
            for &c in raw {
                out.extend_from_slice(&table[c as usize]);
            }
        }
    }
}

fn push_base64(out: &mut Vec<u8>, raw: &[u8], pad_to: usize) {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let padded;
    let data: &[u8] = if raw.len() < pad_to {
        let mut v = raw.to_vec();
        v.resize(pad_to, 0);
        padded = v;
        &padded
    } else {
        raw
    };
    for chunk in data.chunks(3) {
        let n = (chunk[0] as u32) << 16
            | (*chunk.get(1).unwrap_or(&0) as u32) << 8
            | *chunk.get(2).unwrap_or(&0) as u32;
        out.push(T[(n >> 18) as usize & 63]);
        out.push(T[(n >> 12) as usize & 63]);
        out.push(if chunk.len() > 1 {
            T[(n >> 6) as usize & 63]
        } else {
            b'='
        });
        out.push(if chunk.len() > 2 {
            T[n as usize & 63]
        } else {
            b'='
        });
    }
}

impl Col {
    /// Render this column's value at `o` into `out`.
    fn render(&self, b: &[u8], o: &mut usize, out: &mut Vec<u8>) -> Result<(), Fail> {
        match self.kind {
            K_INT => {
                let raw = take(b, o, self.a)?;
                let u = le(raw);
                let bits = 8 * self.a as u32;
                let v: i128 = if self.b != 0 && bits < 64 && u >> (bits - 1) & 1 == 1 {
                    u as i128 - (1i128 << bits)
                } else if self.b != 0 && bits == 64 {
                    u as i64 as i128
                } else {
                    u as i128
                };
                push_int(out, v);
            }
            K_DOUBLE => {
                let raw = take(b, o, 8)?;
                let v = f64::from_le_bytes(raw.try_into().map_err(|_| "double")?);
                push_double(out, v);
            }
            K_FLOAT => {
                let raw = take(b, o, 4)?;
                java::push_java_float(
                    out,
                    f32::from_le_bytes(raw.try_into().map_err(|_| "float")?),
                );
            }
            K_DECIMAL => {
                let (p, s) = (self.a, self.b as usize);
                let raw = take(b, o, decimal_size(p, s))?;
                let start = out.len();
                push_decimal(out, raw, p, s)?;
                java::java_decimal_in_place(out, start);
            }
            K_DATE => {
                let v = le(take(b, o, 3)?);
                out.push(b'"');
                push_ymd(out, (v >> 9) as i64, (v >> 5) & 15, v & 31);
                out.push(b'"');
            }
            K_DATETIME2 => {
                let fsp = self.a;
                let n = be(take(b, o, 5 + fsp_bytes(fsp))?);
                let frac_bits = fsp_bytes(fsp) * 8;
                let packed = (n >> frac_bits) as i64 - 0x80_0000_0000;
                if packed < 0 {
                    return Err("negative DATETIME");
                }
                let ymd = packed >> 17;
                let ym = ymd >> 5;
                let hms = (packed & 0x1FFFF) as u64;
                out.push(b'"');
                push_ymd(out, ym / 13, (ym % 13) as u64, (ymd & 31) as u64);
                out.push(b' ');
                push_hms(out, hms >> 12, (hms >> 6) & 63, hms & 63);
                if fsp > 0 {
                    push_fraction(out, (n & ((1u64 << frac_bits) - 1)) * self.frac_scale, fsp)?;
                }
                out.push(b'"');
            }
            K_TIMESTAMP2 => {
                let fsp = self.a;
                let n = be(take(b, o, 4 + fsp_bytes(fsp))?);
                let frac_bits = fsp_bytes(fsp) * 8;
                let seconds = n >> frac_bits;
                out.push(b'"');
                if seconds == 0 {
                    out.extend_from_slice(b"0000-00-00 00:00:00");
                } else {
                    let (days, secs) = ((seconds / 86400) as i64, seconds % 86400);
                    let (y, m, d) = civil_from_days(days);
                    push_ymd(out, y, m, d);
                    out.push(b' ');
                    push_hms(out, secs / 3600, secs / 60 % 60, secs % 60);
                }
                if fsp > 0 {
                    push_fraction(out, (n & ((1u64 << frac_bits) - 1)) * self.frac_scale, fsp)?;
                }
                out.push(b'"');
            }
            K_TIME2 => {
                let fsp = self.a;
                let n = be(take(b, o, 3 + fsp_bytes(fsp))?) as i64;
                let mut packed: i64 = if fsp == 0 {
                    (n - 0x800000) << 24
                } else if fsp <= 2 {
                    let (mut ip, mut fr) = ((n >> 8) - 0x800000, n & 0xFF);
                    if ip < 0 && fr != 0 {
                        ip += 1;
                        fr -= 0x100;
                    }
                    (ip << 24) + fr * 10000
                } else if fsp <= 4 {
                    let (mut ip, mut fr) = ((n >> 16) - 0x800000, n & 0xFFFF);
                    if ip < 0 && fr != 0 {
                        ip += 1;
                        fr -= 0x10000;
                    }
                    (ip << 24) + fr * 100
                } else {
                    n - 0x8000_0000_0000
                };
                out.push(b'"');
                if packed < 0 {
                    out.push(b'-');
                    packed = -packed;
                }
                let (hms, micro) = ((packed >> 24) as u64, (packed & 0xFFFFFF) as u64);
                let hour = (hms >> 12) & 0x3FF;
                if hour < 100 {
                    push_d2(out, hour);
                } else {
                    push_int(out, hour as i128);
                }
                out.push(b':');
                push_d2(out, (hms >> 6) & 63);
                out.push(b':');
                push_d2(out, hms & 63);
                if fsp > 0 {
                    push_fraction(out, micro, fsp)?;
                }
                out.push(b'"');
            }
            K_YEAR => {
                let v = take(b, o, 1)?[0] as i128;
                push_int(out, if v != 0 { v + 1900 } else { 0 });
            }
            K_ENUM => {
                let index = le(take(b, o, self.a)?) as usize;
                out.extend_from_slice(self.members.get(index).ok_or("ENUM index out of range")?);
            }
            K_SET => {
                let mask = le(take(b, o, self.a)?);
                let count = self.members.len();
                if count < 64 && mask >> count != 0 {
                    return Err("SET bits out of range");
                }
                out.push(b'[');
                let mut first = true;
                for (i, m) in self.members.iter().enumerate() {
                    if mask >> i & 1 == 1 {
                        if !first {
                            out.push(b',');
                        }
                        first = false;
                        out.extend_from_slice(m);
                    }
                }
                out.push(b']');
            }
            K_UTF8 | K_BYTE_TABLE | K_BASE64 => {
                let len = le(take(b, o, self.a)?) as usize;
                let raw = take(b, o, len)?;
                out.push(b'"');
                match self.kind {
                    K_UTF8 => push_text(out, raw, None),
                    K_BYTE_TABLE => push_text(out, raw, Some(&self.members)),
                    _ => push_base64(out, raw, self.b as usize),
                }
                out.push(b'"');
            }
            K_BIT => {
                let v = be(take(b, o, self.a.div_ceil(8))?);
                push_int(out, v as i128); // BIT(1) too: 0 or 1, as Maxwell prints it
            }
            K_BLOB => {
                let len = le(take(b, o, self.a)?) as usize;
                let raw = take(b, o, len)?;
                self.blob.as_ref().ok_or("no blob plan")?.render(raw, out)?;
            }
            _ => return Err("unknown column kind"),
        }
        Ok(())
    }
}

/// One image's values: rendered bytes per column (None for NULL).
struct Image {
    buf: Vec<u8>,
    spans: Vec<Option<(usize, usize)>>,
    // Per column: the value is the JSON document `null` (rendered `null`, as SQL NULL is).
    json_null: Vec<bool>,
}

impl Image {
    fn new(n: usize) -> Self {
        Image {
            buf: Vec::with_capacity(256),
            spans: vec![None; n],
            json_null: vec![false; n],
        }
    }

    /// Whether column `i` holds the same value in both images (as Maxwell's `old` compares them: a JSON `null`
    /// document and SQL NULL differ).
    fn same(&self, other: &Image, i: usize) -> bool {
        match (self.spans[i], other.spans[i]) {
            (None, None) => self.json_null[i] == other.json_null[i],
            (None, _) | (_, None) => false,
            _ => self.value(i) == other.value(i),
        }
    }

    fn value(&self, i: usize) -> &[u8] {
        match self.spans[i] {
            Some((s, e)) => &self.buf[s..e],
            None => b"null",
        }
    }
}

/// One Arrow string column under construction: the values back to back and their offsets.
struct Column {
    data: Vec<u8>,
    offsets: Vec<i32>,
}

impl Column {
    fn new() -> Self {
        Column {
            data: Vec::with_capacity(1 << 14),
            offsets: vec![0],
        }
    }

    fn end_value(&mut self) -> Result<(), Fail> {
        let end = i32::try_from(self.data.len()).map_err(|_| "rows event larger than 2 GiB")?;
        self.offsets.push(end);
        Ok(())
    }

    fn offsets_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 * self.offsets.len());
        for o in &self.offsets {
            out.extend_from_slice(&o.to_le_bytes());
        }
        out
    }
}

/// Per row, the JSON columns of an image whose value is the JSON document `null`: `["name",...]`, or null for
/// none (the change log's `json_null`/`old_json_null`; Maxwell's text writes both `null`s alike).
struct Marks {
    names: Column,
    valid: Vec<u8>, // Arrow validity bitmap, least significant bit first
    rows: usize,
    any: bool,
}

impl Marks {
    fn new() -> Self {
        Marks {
            names: Column::new(),
            valid: Vec::new(),
            rows: 0,
            any: false,
        }
    }

    /// One row's marks: the columns `marked` (their `"name":` keys in `layout`).
    fn row(&mut self, layout: &Layout, marked: impl Iterator<Item = usize>) -> Result<(), Fail> {
        if self.rows % 8 == 0 {
            self.valid.push(0);
        }
        let mut first = true;
        for i in marked {
            self.names.data.push(if first { b'[' } else { b',' });
            let key = &layout.keys[i];
            self.names.data.extend_from_slice(&key[..key.len() - 1]);
            first = false;
        }
        if !first {
            self.names.data.push(b']');
            self.valid[self.rows >> 3] |= 1 << (self.rows & 7);
            self.any = true;
        }
        self.rows += 1;
        self.names.end_value()
    }
}

struct Rendered {
    rows: usize,
    data: Column,
    old: Column,
    pk: Column,
    hash: Column,
    json_null: Marks,     // filled only when the table has JSON columns
    old_json_null: Marks, // likewise, for `old` (updates)
}

impl Rendered {
    fn new() -> Self {
        Rendered {
            rows: 0,
            data: Column::new(),
            old: Column::new(),
            pk: Column::new(),
            hash: Column::new(),
            json_null: Marks::new(),
            old_json_null: Marks::new(),
        }
    }
}

impl Layout {
    /// The layout of a table of `columns` columns; ValueError when the keys or primary key do not fit it.
    fn checked(
        keys: Vec<String>,
        pk: Vec<usize>,
        hash_prefix: Option<Vec<u8>>,
        columns: usize,
    ) -> PyResult<Self> {
        if keys.len() != columns || pk.iter().any(|i| *i >= columns) {
            return Err(PyValueError::new_err(
                "keys and primary key must match the columns",
            ));
        }
        Ok(Layout::new(keys, pk, hash_prefix))
    }

    fn new(keys: Vec<String>, pk: Vec<usize>, hash_prefix: Option<Vec<u8>>) -> Self {
        Layout {
            keys: keys
                .into_iter()
                .map(|k| format!("{k}:").into_bytes())
                .collect(),
            pk,
            hash_prefix,
            rules: None,
            json: Vec::new(),
        }
    }

    /// The layout marking the JSON `null` documents of the columns `json` flags.
    fn with_json(mut self, json: Vec<bool>) -> Self {
        self.json = if json.contains(&true) {
            json
        } else {
            Vec::new()
        };
        self
    }

    /// Column `i` is a JSON column written as it is (a ruled one is written in its ruled form, not marked).
    fn marks_json(&self, i: usize) -> bool {
        self.json.get(i).copied().unwrap_or(false) && self.rule(i).is_none()
    }

    /// The marks of `data` (and of `old`, from `before`, for an update) of one row, when the table has JSON columns.
    fn mark(&self, img: &Image, before: Option<&Image>, r: &mut Rendered) -> Result<(), Fail> {
        if self.json.is_empty() {
            return Ok(());
        }
        let n = self.keys.len();
        r.json_null.row(
            self,
            (0..n).filter(|&i| img.json_null[i] && self.marks_json(i)),
        )?;
        if let Some(b) = before {
            r.old_json_null.row(
                self,
                (0..n).filter(|&i| b.json_null[i] && !b.same(img, i) && self.marks_json(i)),
            )?;
        }
        Ok(())
    }

    /// The layout writing each column under the table's rules (spec.columns), when it has any.
    fn ruled(mut self, redactor: Option<PyRef<'_, redact::Redactor>>) -> Self {
        if let Some(r) = redactor {
            let per_column = r.rules.per_column(&self.keys);
            self.rules = Some((Arc::clone(&r.rules), per_column));
        }
        self
    }

    /// Column `i`'s rule, when it has one.
    fn rule(&self, i: usize) -> Option<(&redact::Rules, usize)> {
        let (rules, per_column) = self.rules.as_ref()?;
        per_column[i].map(|r| (rules.as_ref(), r))
    }

    /// Whether column `i` is excluded (spec.columns): never written, so never rendered.
    fn excluded(&self, i: usize) -> bool {
        matches!(self.rule(i), Some((rules, r)) if rules.kind(r) == redact::Rules::EXCLUDE)
    }

    /// `"name":value` of column `i` (after a comma unless `first`), in its ruled form; false when excluded.
    fn member(&self, i: usize, value: &[u8], first: bool, out: &mut Vec<u8>) -> Result<bool, Fail> {
        if self.excluded(i) {
            return Ok(false);
        }
        let rule = self.rule(i);
        if !first {
            out.push(b',');
        }
        out.extend_from_slice(&self.keys[i]);
        match rule {
            None => out.extend_from_slice(value),
            Some((rules, r)) => rules.ruled(r, value, out)?,
        }
        Ok(true)
    }

    fn object(&self, img: &Image, out: &mut Vec<u8>) -> Result<(), Fail> {
        out.push(b'{');
        if self.rules.is_none() {
            for i in 0..self.keys.len() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(&self.keys[i]);
                out.extend_from_slice(img.value(i));
            }
        } else {
            let mut first = true;
            for i in 0..self.keys.len() {
                if self.member(i, img.value(i), first, out)? {
                    first = false;
                }
            }
        }
        out.push(b'}');
        Ok(())
    }

    /// Maxwell's `old`: the before values of the columns whose rendered value changed (as Java's
    /// `equals` sees Maxwell's values: 0.0 and -0.0 differ).
    fn old_object(&self, before: &Image, after: &Image, out: &mut Vec<u8>) -> Result<(), Fail> {
        out.push(b'{');
        let mut first = true;
        for i in 0..self.keys.len() {
            // Changed as the source values are (a ruled column is in `old` when its source value changed).
            if !before.same(after, i) && self.member(i, before.value(i), first, out)? {
                first = false;
            }
        }
        out.push(b'}');
        Ok(())
    }

    fn key(&self, img: &Image, r: &mut Rendered) -> Result<(), Fail> {
        if self.pk.is_empty() {
            return Ok(());
        }
        let start = r.pk.data.len();
        r.pk.data.push(b'[');
        for (j, &i) in self.pk.iter().enumerate() {
            if j > 0 {
                r.pk.data.push(b',');
            }
            let value = img.value(i);
            match self
                .rules
                .as_ref()
                .and_then(|(rules, _)| rules.key_column(j).map(|b| (rules, b)))
            {
                Some((rules, binary)) if value != b"null" => {
                    rules.hash(value, binary, &mut r.pk.data)?
                }
                _ => r.pk.data.extend_from_slice(value),
            }
        }
        r.pk.data.push(b']');
        let Some(prefix) = &self.hash_prefix else {
            return r.pk.end_value();
        };
        let mut hasher = Blake2bVar::new(8).expect("8-byte BLAKE2b");
        hasher.update(prefix);
        hasher.update(&r.pk.data[start..]);
        r.pk.end_value()?;
        let mut digest = [0u8; 8];
        hasher
            .finalize_variable(&mut digest)
            .expect("8-byte digest");
        const HEX: &[u8; 16] = b"0123456789abcdef";
        for x in digest {
            r.hash.data.push(HEX[(x >> 4) as usize]);
            r.hash.data.push(HEX[(x & 15) as usize]);
        }
        r.hash.end_value()
    }
}

impl RowRenderer {
    fn read_image(&self, b: &[u8], o: &mut usize, img: &mut Image) -> Result<(), Fail> {
        let n = self.cols.len();
        let nulls = take(b, o, n.div_ceil(8))?;
        img.buf.clear();
        for (i, col) in self.cols.iter().enumerate() {
            img.json_null[i] = false;
            if nulls[i >> 3] & (1 << (i & 7)) != 0 {
                img.spans[i] = None;
                continue;
            }
            if col.kind == K_BLOB && self.layout.excluded(i) {
                // Never written (spec.columns.exclude): stepped over, not rendered.
                let len = le(take(b, o, col.a)?) as usize;
                take(b, o, len)?;
                img.spans[i] = None;
                continue;
            }
            let (start, at) = (img.buf.len(), *o);
            col.render(b, o, &mut img.buf)?;
            // A value that renders as null (a NaN, a JSON null) is None on the reference path too; a JSON column's
            // JSON document `null` is marked apart from SQL NULL.
            img.spans[i] = if &img.buf[start..] == b"null" {
                img.json_null[i] =
                    col.kind == K_BLOB && blob::is_json_null(col.b, &b[at + col.a..*o]);
                None
            } else {
                Some((start, img.buf.len()))
            };
        }
        Ok(())
    }

    fn render_body(&self, kind: u8, b: &[u8]) -> Result<Rendered, Fail> {
        let n = self.cols.len();
        let mut r = Rendered::new();
        let (mut first, mut second) = (Image::new(n), Image::new(n));
        let mut o = 0;
        while o < b.len() {
            self.read_image(b, &mut o, &mut first)?;
            let image = if kind == 1 {
                self.read_image(b, &mut o, &mut second)?;
                self.layout.old_object(&first, &second, &mut r.old.data)?;
                r.old.end_value()?;
                self.layout.mark(&second, Some(&first), &mut r)?;
                &second
            } else {
                self.layout.mark(&first, None, &mut r)?;
                &first
            };
            self.layout.object(image, &mut r.data.data)?;
            r.data.end_value()?;
            self.layout.key(image, &mut r)?;
            r.rows += 1;
        }
        Ok(r)
    }
}

fn into_string(v: Vec<u8>) -> String {
    // Every piece written is UTF-8: ASCII, escaped UTF-8 text, or Python-made fragments.
    String::from_utf8(v).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

#[pymethods]
impl RowRenderer {
    /// columns: (kind, a, b, members) per column; keys: the JSON text of each column name;
    /// pk: primary-key column indexes; hash_prefix: b"database\0table\0" (None: no key hashes); fallbacks: per
    /// column, the
    /// reference converter (raw bytes -> JSON text) of a K_BLOB column.
    #[new]
    #[pyo3(signature = (columns, keys, pk, hash_prefix, fallbacks=None, redactor=None))]
    fn new(
        columns: Vec<(u8, usize, i64, Vec<String>)>,
        keys: Vec<String>,
        pk: Vec<usize>,
        hash_prefix: Option<Vec<u8>>,
        fallbacks: Option<Vec<Option<Py<PyAny>>>>,
        redactor: Option<PyRef<'_, redact::Redactor>>,
    ) -> PyResult<Self> {
        let json = columns
            .iter()
            .map(|(kind, _, b, _)| *kind == K_BLOB && blob::is_json(*b))
            .collect();
        let layout = Layout::checked(keys, pk, hash_prefix, columns.len())?
            .ruled(redactor)
            .with_json(json);
        let mut fallbacks = fallbacks.unwrap_or_default();
        fallbacks.resize_with(columns.len(), || None);
        let mut cols = Vec::with_capacity(columns.len());
        for ((kind, a, b, members), fallback) in columns.into_iter().zip(fallbacks) {
            if kind > K_BLOB || (kind == K_INT && ![1, 2, 3, 4, 8].contains(&a)) {
                return Err(PyValueError::new_err(format!("bad column kind {kind}/{a}")));
            }
            if matches!(kind, K_DATETIME2 | K_TIMESTAMP2 | K_TIME2) && a > 6 {
                return Err(PyValueError::new_err("fsp out of range"));
            }
            if kind == K_DECIMAL && (b < 0 || b as usize > a || a == 0 || a > 65) {
                return Err(PyValueError::new_err("bad DECIMAL precision/scale"));
            }
            if kind == K_BYTE_TABLE && members.len() != 256 {
                return Err(PyValueError::new_err("a byte table has 256 entries"));
            }
            if matches!(kind, K_ENUM | K_SET) && !(1..=8).contains(&a) {
                return Err(PyValueError::new_err("bad ENUM/SET size"));
            }
            if matches!(kind, K_UTF8 | K_BYTE_TABLE | K_BASE64 | K_BLOB) && !(1..=4).contains(&a) {
                return Err(PyValueError::new_err("bad length prefix"));
            }
            if kind == K_BIT && !(1..=64).contains(&a) {
                return Err(PyValueError::new_err("bad BIT width"));
            }
            let frac_scale = if matches!(kind, K_DATETIME2 | K_TIMESTAMP2) {
                FRAC_SCALE[a]
            } else {
                1
            };
            let members: Vec<Vec<u8>> = members.into_iter().map(String::into_bytes).collect();
            let blob = if kind == K_BLOB {
                Some(blob::Blob::checked(b, members.clone(), fallback)?)
            } else {
                None
            };
            cols.push(Col {
                kind,
                a,
                b,
                members: if kind == K_BLOB { Vec::new() } else { members },
                frac_scale,
                blob,
            });
        }
        Ok(RowRenderer { cols, layout })
    }

    /// Render a rows event body (kind 0 insert, 1 update, 2 delete) as Arrow string columns, one value
    /// per row: (rows, data, old, pk, pk_hash, json_null, old_json_null), each column (values bytes, int32
    /// little-endian offsets bytes) or None (`old` outside UPDATEs, `pk` and `pk_hash` without a primary key);
    /// the last two (values, offsets, validity bitmap), None when no row holds a JSON `null` document (`Marks`).
    /// ValueError when the body does not decode.
    /// The GIL is released only for a body of DETACH_BYTES or more: a rows event is usually a few KiB (the
    /// server cuts them at binlog_row_event_max_size, 8 KiB by default), rendered in microseconds, and a thread
    /// that gives the GIL up while another runs Python waits up to the switch interval to get it back.
    fn render<'py>(&self, py: Python<'py>, kind: u8, body: &[u8]) -> PyResult<Bound<'py, PyAny>> {
        let r = if body.len() >= DETACH_BYTES {
            py.detach(|| self.render_body(kind, body))
        } else {
            self.render_body(kind, body)
        }
        .map_err(PyValueError::new_err)?;
        let keyed = !self.layout.pk.is_empty();
        Ok((
            r.rows,
            py_column(py, r.data, true)?,
            py_column(py, r.old, kind == 1)?,
            py_column(py, r.pk, keyed)?,
            py_column(py, r.hash, keyed && self.layout.hash_prefix.is_some())?,
            py_marks(py, r.json_null)?,
            py_marks(py, r.old_json_null)?,
        )
            .into_pyobject(py)?
            .into_any())
    }
}

/// Bytes rendered here, handed to Python without a copy: a read-only buffer (`pyarrow.py_buffer`, `bytes()`,
/// `memoryview`) over the vector that holds them.
#[pyclass(frozen)]
struct OwnedBuffer {
    data: Vec<u8>,
}

#[pymethods]
impl OwnedBuffer {
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut pyo3::ffi::Py_buffer,
        flags: std::os::raw::c_int,
    ) -> PyResult<()> {
        let data = &slf.get().data;
        // Read-only, contiguous bytes; the view holds a reference to this object, so the vector outlives it.
        let ret = pyo3::ffi::PyBuffer_FillInfo(
            view,
            slf.as_ptr(),
            data.as_ptr() as *mut std::os::raw::c_void,
            data.len() as pyo3::ffi::Py_ssize_t,
            1,
            flags,
        );
        if ret == -1 {
            return Err(PyErr::fetch(slf.py()));
        }
        if flags & pyo3::ffi::PyBUF_FORMAT == pyo3::ffi::PyBUF_FORMAT {
            // Signed bytes, as PyArrow's buffers say: both pass back into `join_texts` and the Maxwell renderer
            // (`Column`) unwrapped.
            (*view).format = c"b".as_ptr() as *mut std::os::raw::c_char;
        }
        Ok(())
    }

    fn __len__(&self) -> usize {
        self.data.len()
    }
}

/// A rows event body at least this large is rendered without the GIL (`RowRenderer::render`).
const DETACH_BYTES: usize = 1 << 20;

/// Values of at least this size are cut to size in place rather than copied (`py_column`).
const SHRINK_IN_PLACE: usize = 256 * 1024;

/// An Arrow string column as Python sees it: (values, int32 little-endian offsets) as buffers, or None.
/// A column's vector moves to Python (no copy of the values) when it is about its bytes' size. Python holds these
/// until their commit, so one much larger is cut to their size: a small one is copied (a rows event of one row has
/// a 16 KiB vector; shrunk in place, what it leaves free would fragment the heap: 30,000 one-row events in one
/// transaction took 200 MiB more), a large one shrunk where it is (`realloc` to a smaller size: no copy, and the
/// pages freed go back whole). A snapshot chunk's vector is sized from the chunks before it: copying the megabytes
/// of every chunk a little smaller than the last cost a copy and fresh pages per chunk.
fn py_column(py: Python<'_>, c: Column, present: bool) -> PyResult<Bound<'_, PyAny>> {
    if !present {
        return Ok(py.None().into_bound(py));
    }
    let offsets = c.offsets_bytes();
    let mut data = c.data;
    if data.capacity() - data.len() > data.len() / 8 + 64 {
        if data.len() >= SHRINK_IN_PLACE {
            data.shrink_to_fit();
        } else {
            data = data.as_slice().to_vec();
        }
    }
    Ok((
        Bound::new(py, OwnedBuffer { data })?,
        Bound::new(py, OwnedBuffer { data: offsets })?,
    )
        .into_pyobject(py)?
        .into_any())
}

/// A batch's `Marks` as Python sees them: (values, int32 offsets, validity bitmap) buffers, None when no row has any.
fn py_marks(py: Python<'_>, m: Marks) -> PyResult<Bound<'_, PyAny>> {
    if !m.any {
        return Ok(py.None().into_bound(py));
    }
    let offsets = m.names.offsets_bytes();
    Ok((
        Bound::new(py, OwnedBuffer { data: m.names.data })?,
        Bound::new(py, OwnedBuffer { data: offsets })?,
        Bound::new(py, OwnedBuffer { data: m.valid })?,
    )
        .into_pyobject(py)?
        .into_any())
}

/// Java's text for a double (exposed for the tests that compare the two paths across many values).
#[pyfunction]
fn format_double(v: f64) -> String {
    let mut out = Vec::new();
    push_double(&mut out, v);
    into_string(out)
}

/// The rendered text of a FLOAT given its four little-endian bytes (exposed for the same tests).
#[pyfunction]
fn format_float(raw: [u8; 4]) -> String {
    let mut out = Vec::new();
    java::push_java_float(&mut out, f32::from_le_bytes(raw));
    into_string(out)
}

#[pymodule]
fn mysqlcapture_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<RowRenderer>()?;
    m.add_class::<OwnedBuffer>()?;
    m.add_class::<text::TextRenderer>()?;
    m.add_class::<text::ResultReader>()?;
    m.add_class::<redact::Redactor>()?;
    m.add_function(wrap_pyfunction!(maxwell::maxwell_rows, m)?)?;
    m.add_class::<maxwell::Messages>()?;
    m.add_class::<kafka::DirectProducer>()?;
    m.add_function(wrap_pyfunction!(join::join_texts, m)?)?;
    m.add_function(wrap_pyfunction!(format_double, m)?)?;
    m.add_function(wrap_pyfunction!(format_float, m)?)?;
    Ok(())
}
