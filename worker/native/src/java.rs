//! Numbers and strings as Maxwell's Java prints them (mirrors mysqlcapture_worker.decode.javatext).

/// Significant digits of a number's decimal text, on the stack.
struct Digits {
    buf: [u8; 40],
    len: usize,
}

impl std::ops::Deref for Digits {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// (significant digits, decimal exponent of the first digit) of a positive number's decimal text
/// ("1.5e-7", "100.0", "5e-324", "1.0e20").
fn digits_exp(text: &str) -> (Digits, i32) {
    let (mant, e) = text.split_once(['e', 'E']).unwrap_or((text, "0"));
    let e: i32 = e.trim_start_matches('+').parse().unwrap_or(0);
    let (int_part, frac_part) = mant.split_once('.').unwrap_or((mant, ""));
    let mut d = Digits {
        buf: [0; 40],
        len: 0,
    };
    let mut lead = 0usize;
    let mut seen = false;
    for c in int_part.bytes().chain(frac_part.bytes()) {
        if !seen && c == b'0' {
            lead += 1;
            continue;
        }
        seen = true;
        if d.len < d.buf.len() {
            d.buf[d.len] = c;
            d.len += 1;
        }
    }
    let exp = int_part.len() as i32 + e - 1 - lead as i32;
    while d.len > 1 && d.buf[d.len - 1] == b'0' {
        d.len -= 1;
    }
    if d.len == 0 {
        d.buf[0] = b'0';
        d.len = 1;
        return (d, 0);
    }
    (d, exp)
}

/// Java's `Double.toString` layout: plain for exponents -3..6, else `d.dddE[-]n`.
fn layout(out: &mut Vec<u8>, negative: bool, digits: &[u8], exp: i32) {
    if negative {
        out.push(b'-');
    }
    let n = digits.len() as i32;
    if (-3..7).contains(&exp) {
        if exp >= 0 {
            if n <= exp + 1 {
                out.extend_from_slice(digits);
                out.extend(std::iter::repeat_n(b'0', (exp + 1 - n) as usize));
                out.extend_from_slice(b".0");
            } else {
                out.extend_from_slice(&digits[..(exp + 1) as usize]);
                out.push(b'.');
                out.extend_from_slice(&digits[(exp + 1) as usize..]);
            }
        } else {
            out.extend_from_slice(b"0.");
            out.extend(std::iter::repeat_n(b'0', (-exp - 1) as usize));
            out.extend_from_slice(digits);
        }
    } else {
        out.push(digits[0]);
        out.push(b'.');
        if n > 1 {
            out.extend_from_slice(&digits[1..]);
        } else {
            out.push(b'0');
        }
        out.push(b'E');
        if exp < 0 {
            out.push(b'-');
        }
        crate::push_int(out, exp.unsigned_abs() as i128);
    }
}

/// `Double.toString(v)` (JDK 19+): the shortest digits that read back; when one digit would do, the
/// nearer of the one- and two-digit decimals that read back ("4.9E-324"), which differs from the one
/// digit only where the rounding interval is wider than 5% of a digit: subnormal values.
pub fn push_java_double(out: &mut Vec<u8>, v: f64) {
    let mut buf = ryu::Buffer::new();
    let shortest = v.is_finite().then(|| buf.format_finite(v.abs()));
    push_java(out, v, shortest, !v.is_normal(), |two| {
        two.parse::<f64>() == Ok(v.abs())
    });
}

/// `Float.toString(v)` (JDK 19+), the same rule over float32.
pub fn push_java_float(out: &mut Vec<u8>, v: f32) {
    let mut buf = ryu::Buffer::new();
    let shortest = v.is_finite().then(|| buf.format_finite(v.abs()));
    push_java(out, v as f64, shortest, !v.is_normal(), |two| {
        two.parse::<f32>() == Ok(v.abs())
    });
}

/// Java's text of `v` given the shortest digits of its magnitude (None: not finite, printed as null);
/// `reads_back` says whether a two-digit decimal reads back as the same value in its own precision.
fn push_java(
    out: &mut Vec<u8>,
    v: f64,
    shortest: Option<&str>,
    subnormal: bool,
    reads_back: impl Fn(&str) -> bool,
) {
    let Some(shortest) = shortest else {
        out.extend_from_slice(b"null");
        return;
    };
    if v == 0.0 {
        out.extend_from_slice(if v.is_sign_negative() {
            b"-0.0"
        } else {
            b"0.0"
        });
        return;
    }
    let (mut digits, mut exp) = digits_exp(shortest);
    if digits.len() == 1 && subnormal {
        let two = format!("{:.1e}", v.abs());
        if reads_back(&two) {
            (digits, exp) = digits_exp(&two);
        }
    }
    layout(out, v < 0.0, &digits, exp);
}

/// `BigDecimal.toString` of the DECIMAL text MySQL prints, written at `out[start..]`: rewritten in
/// place as `d.dddE-n` when its adjusted exponent is below -6 ("0E-10", "-1.23E-7").
pub fn java_decimal_in_place(out: &mut Vec<u8>, start: usize) {
    let text = &out[start..];
    let negative = text.first() == Some(&b'-');
    let body = if negative { &text[1..] } else { text };
    let (whole, frac): (&[u8], &[u8]) = match body.iter().position(|c| *c == b'.') {
        Some(p) => (&body[..p], &body[p + 1..]),
        None => (body, &[]),
    };
    let all: Vec<u8> = whole.iter().chain(frac.iter()).copied().collect();
    let lead = all.iter().position(|c| *c != b'0').unwrap_or(all.len());
    let unscaled: &[u8] = if lead == all.len() {
        b"0"
    } else {
        &all[lead..]
    };
    let adjusted = unscaled.len() as i64 - 1 - frac.len() as i64;
    if adjusted >= -6 {
        return;
    }
    let mut sci = Vec::with_capacity(unscaled.len() + 8);
    if negative {
        sci.push(b'-');
    }
    sci.push(unscaled[0]);
    if unscaled.len() > 1 {
        sci.push(b'.');
        sci.extend_from_slice(&unscaled[1..]);
    }
    sci.extend_from_slice(b"E-");
    crate::push_int(&mut sci, adjusted.unsigned_abs() as i128);
    out.truncate(start);
    out.extend_from_slice(&sci);
}

/// A coordinate as JTS's WKTWriter prints it: positional, no exponent, no ".0" (the shortest digits;
/// JTS would round to 16 fraction digits). None for NaN and infinities.
pub fn push_plain(out: &mut Vec<u8>, v: f64) -> bool {
    if !v.is_finite() {
        return false;
    }
    if v == 0.0 {
        out.extend_from_slice(if v.is_sign_negative() { b"-0" } else { b"0" });
        return true;
    }
    let mut buf = ryu::Buffer::new();
    let (digits, exp) = digits_exp(buf.format_finite(v.abs()));
    if v < 0.0 {
        out.push(b'-');
    }
    let n = digits.len() as i32;
    if exp < 0 {
        out.extend_from_slice(b"0.");
        out.extend(std::iter::repeat_n(b'0', (-exp - 1) as usize));
        out.extend_from_slice(&digits);
    } else if n <= exp + 1 {
        out.extend_from_slice(&digits);
        out.extend(std::iter::repeat_n(b'0', (exp + 1 - n) as usize));
    } else {
        out.extend_from_slice(&digits[..(exp + 1) as usize]);
        out.push(b'.');
        out.extend_from_slice(&digits[(exp + 1) as usize..]);
    }
    true
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

fn push_u16_escape(out: &mut Vec<u8>, u: u32) {
    out.extend_from_slice(b"\\u");
    for shift in [12, 8, 4, 0] {
        out.push(HEX[((u >> shift) & 15) as usize]);
    }
}

/// The inside of a JSON string as Jackson's UTF-8 generator writes it (`surrogates`: characters beyond
/// the BMP as an escaped surrogate pair) or as mysql-binlog-connector-java's JsonStringFormatter does
/// (not `surrogates`): `"`, `\`, the short escapes, other control characters as `\u00XX`.
pub fn push_escaped(out: &mut Vec<u8>, s: &str, surrogates: bool) {
    let bytes = s.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c >= 0x20 && c != b'"' && c != b'\\' && (c < 0xF0 || !surrogates) {
            i += 1;
            continue;
        }
        out.extend_from_slice(&bytes[start..i]);
        if c >= 0xF0 {
            let ch = s[i..].chars().next().map(|ch| ch as u32).unwrap_or(0xFFFD);
            let u = ch - 0x10000;
            push_u16_escape(out, 0xD800 + (u >> 10));
            push_u16_escape(out, 0xDC00 + (u & 0x3FF));
            i += 4;
            start = i;
            continue;
        }
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0C => out.extend_from_slice(b"\\f"),
            _ => push_u16_escape(out, c as u32),
        }
        i += 1;
        start = i;
    }
    out.extend_from_slice(&bytes[start..]);
}
