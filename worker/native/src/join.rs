//! Many Arrow string columns joined into one: a commit's row batches, each rendered on its own, become one column of
//! the change log (`sinks/delta.py`), one copy of their bytes and no Python object per batch beyond its buffers.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::maxwell::{Column, Strings};
use crate::OwnedBuffer;

/// (values, int32 offsets, validity bitmap or None, null count) of `parts` joined in order: each part a column's
/// buffers (`Column`) or None for that many null rows. ValueError when the joined values pass 2 GiB (an Arrow
/// string column's limit) or a part's buffers do not hold its rows.
#[pyfunction]
pub fn join_texts<'py>(py: Python<'py>, parts: Vec<(Option<Column>, usize)>) -> PyResult<Bound<'py, PyAny>> {
    let columns = parts
        .iter()
        .map(|(c, n)| Ok((c.as_ref().map(Strings::of).transpose()?, *n)))
        .collect::<Result<Vec<_>, &'static str>>()
        .map_err(PyValueError::new_err)?;
    let rows: usize = columns.iter().map(|(c, n)| c.as_ref().map_or(*n, |s| s.len)).sum();
    let bytes: usize = columns.iter().map(|(c, _)| c.as_ref().map_or(0, Strings::span)).sum();
    if bytes > i32::MAX as usize {
        return Err(PyValueError::new_err("the joined texts pass 2 GiB"));
    }
    // Without the GIL: a commit's texts are megabytes, and the binlog reader has Python to run meanwhile.
    let (values, offsets, validity, nulls) = py.detach(|| {
        let mut values = Vec::with_capacity(bytes);
        let mut offsets = Vec::with_capacity(4 * (rows + 1));
        let mut validity = vec![0u8; rows.div_ceil(8)];
        let mut nulls = 0usize;
        let mut row = 0usize;
        offsets.extend_from_slice(&0i32.to_le_bytes());
        for (column, n) in &columns {
            let count = column.as_ref().map_or(*n, |s| s.len);
            for i in 0..count {
                match column.as_ref().and_then(|s| s.get(i)) {
                    Some(v) => {
                        values.extend_from_slice(v);
                        validity[row >> 3] |= 1 << (row & 7);
                    }
                    None => nulls += 1,
                }
                offsets.extend_from_slice(&(values.len() as i32).to_le_bytes());
                row += 1;
            }
        }
        (values, offsets, validity, nulls)
    });
    let validity = if nulls == 0 {
        py.None().into_bound(py)
    } else {
        Bound::new(py, OwnedBuffer { data: validity })?.into_any()
    };
    Ok((
        Bound::new(py, OwnedBuffer { data: values })?,
        Bound::new(py, OwnedBuffer { data: offsets })?,
        validity,
        nulls,
    )
        .into_pyobject(py)?
        .into_any())
}
