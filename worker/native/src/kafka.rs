//! Queueing a run's Kafka messages (`maxwell::Messages`) on a confluent-kafka `Producer`'s own librdkafka handle,
//! through librdkafka's C API, without a Python object per message.
//!
//! `Producer.produce_batch` takes a dict per message and gives each a delivery state whose report, served in
//! `flush` or `commit_transaction`, takes the GIL once per message (even under `delivery.report.only.error`): a
//! million rows cost the committer over a second of GIL the binlog reader waits for. Messages queued here carry no
//! such state, so librdkafka's delivery report returns at once; a message the brokers refuse still fails its
//! transaction's commit (librdkafka makes the transaction abortable), and the sink then commits the same events
//! again through `produce_batch` to name the message (`mysqlcapture_worker.sinks.kafka`).
//!
//! The handle and the library are the ones the Python producer uses: the library is opened with RTLD_NOLOAD (the
//! copy already loaded, never a second one) and the handle is checked to be a producer's before any use.

use std::ffi::{c_char, c_int, c_void, CStr, CString};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::maxwell::Messages;

const RTLD_NOW: c_int = 2;
const RTLD_NOLOAD: c_int = 4;
const RD_KAFKA_PRODUCER: c_int = 0;
const RD_KAFKA_MSG_F_COPY: c_int = 0x2;

extern "C" {
    fn dlopen(filename: *const c_char, flags: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}

/// librdkafka's `rd_kafka_message_t` (rdkafka.h), as `rd_kafka_produce_batch` reads and marks it.
#[repr(C)]
struct RdMessage {
    err: c_int,
    rkt: *mut c_void,
    partition: i32,
    payload: *mut c_void,
    len: usize,
    key: *mut c_void,
    key_len: usize,
    offset: i64,
    private: *mut c_void,
}

type ProduceBatch = unsafe extern "C" fn(*mut c_void, i32, c_int, *mut RdMessage, c_int) -> c_int;
type TopicNew = unsafe extern "C" fn(*mut c_void, *const c_char, *mut c_void) -> *mut c_void;
type TopicDestroy = unsafe extern "C" fn(*mut c_void);
type Err2Str = unsafe extern "C" fn(c_int) -> *const c_char;
type KafkaType = unsafe extern "C" fn(*mut c_void) -> c_int;
type KafkaName = unsafe extern "C" fn(*mut c_void) -> *const c_char;

/// A producer handle's librdkafka functions.
#[pyclass(frozen)]
pub struct DirectProducer {
    rk: usize,
    produce_batch: ProduceBatch,
    topic_new: TopicNew,
    topic_destroy: TopicDestroy,
    err2str: Err2Str,
    /// The handle's librdkafka name (`rdkafka#producer-1`), for the sink to check against its producer.
    #[pyo3(get)]
    name: String,
}

unsafe fn symbol<T>(library: *mut c_void, name: &str) -> Result<T, String> {
    let c = CString::new(name).map_err(|e| e.to_string())?;
    let found = dlsym(library, c.as_ptr());
    if found.is_null() {
        return Err(format!("librdkafka has no {name}"));
    }
    Ok(std::mem::transmute_copy::<*mut c_void, T>(&found))
}

#[pymethods]
impl DirectProducer {
    /// `library`: the path of the librdkafka the producer's module loaded; `handle`: the producer's `rd_kafka_t`.
    /// ValueError when the library is not loaded already, lacks a function, or the handle is not a producer's.
    #[new]
    fn new(library: &str, handle: usize) -> PyResult<Self> {
        let path = CString::new(library).map_err(|e| PyValueError::new_err(e.to_string()))?;
        // SAFETY: RTLD_NOLOAD only returns a library already in the process; the symbols are librdkafka's public
        // API with the signatures of rdkafka.h.
        unsafe {
            let lib = dlopen(path.as_ptr(), RTLD_NOW | RTLD_NOLOAD);
            if lib.is_null() {
                return Err(PyValueError::new_err(format!(
                    "{library} is not loaded in this process"
                )));
            }
            let kind: KafkaType = symbol(lib, "rd_kafka_type").map_err(PyValueError::new_err)?;
            let name: KafkaName = symbol(lib, "rd_kafka_name").map_err(PyValueError::new_err)?;
            let rk = handle as *mut c_void;
            if rk.is_null() || kind(rk) != RD_KAFKA_PRODUCER {
                return Err(PyValueError::new_err(
                    "the handle is not a librdkafka producer's",
                ));
            }
            let name = CStr::from_ptr(name(rk)).to_string_lossy().into_owned();
            Ok(DirectProducer {
                rk: handle,
                produce_batch: symbol(lib, "rd_kafka_produce_batch")
                    .map_err(PyValueError::new_err)?,
                topic_new: symbol(lib, "rd_kafka_topic_new").map_err(PyValueError::new_err)?,
                topic_destroy: symbol(lib, "rd_kafka_topic_destroy")
                    .map_err(PyValueError::new_err)?,
                err2str: symbol(lib, "rd_kafka_err2str").map_err(PyValueError::new_err)?,
                name,
            })
        }
    }

    /// Queue every group of `messages` on `topics[group]` and its partition, copied, a group in one call and in
    /// order. None when all were queued, else the first refusal: (topic, partition, messages of its group queued,
    /// librdkafka's error code and text, the refused message's key). The GIL is released meanwhile.
    #[allow(clippy::type_complexity)]
    fn produce(
        &self,
        py: Python<'_>,
        messages: &Messages,
        topics: Vec<String>,
    ) -> PyResult<Option<(String, i64, usize, i32, String, Vec<u8>)>> {
        let names = topics
            .iter()
            .map(|t| CString::new(t.as_str()))
            .collect::<Result<Vec<_>, _>>();
        let names = names.map_err(|e| PyValueError::new_err(e.to_string()))?;
        if messages
            .groups
            .iter()
            .any(|((group, _), _)| *group >= names.len())
        {
            return Err(PyValueError::new_err(
                "a message's topic group has no topic",
            ));
        }
        Ok(py.detach(|| self.queue(messages, &names, &topics)))
    }
}

impl DirectProducer {
    #[allow(clippy::type_complexity)]
    fn queue(
        &self,
        m: &Messages,
        names: &[CString],
        topics: &[String],
    ) -> Option<(String, i64, usize, i32, String, Vec<u8>)> {
        let rk = self.rk as *mut c_void;
        for ((group, partition), rows) in &m.groups {
            let mut batch: Vec<RdMessage> = rows
                .iter()
                .map(|&i| {
                    let (value, key) = (m.value(i), m.key(i));
                    RdMessage {
                        err: 0,
                        rkt: std::ptr::null_mut(),
                        partition: *partition as i32,
                        payload: value.as_ptr() as *mut c_void,
                        len: value.len(),
                        key: key.as_ptr() as *mut c_void,
                        key_len: key.len(),
                        offset: 0,
                        private: std::ptr::null_mut(),
                    }
                })
                .collect();
            // SAFETY: rk is a live producer (checked in `new`; the sink keeps its Producer while this exists);
            // F_COPY: librdkafka copies every payload and key before the call returns.
            let (queued, refused) = unsafe {
                let rkt = (self.topic_new)(rk, names[*group].as_ptr(), std::ptr::null_mut());
                if rkt.is_null() {
                    return Some((
                        topics[*group].clone(),
                        *partition,
                        0,
                        -1,
                        "no topic handle".into(),
                        Vec::new(),
                    ));
                }
                let n = batch.len() as c_int;
                let queued = (self.produce_batch)(
                    rkt,
                    *partition as i32,
                    RD_KAFKA_MSG_F_COPY,
                    batch.as_mut_ptr(),
                    n,
                );
                (self.topic_destroy)(rkt);
                (queued.max(0) as usize, queued < n)
            };
            if refused {
                let (at, failed) = batch
                    .iter()
                    .enumerate()
                    .find(|(_, b)| b.err != 0)
                    .unwrap_or((0, &batch[0]));
                // SAFETY: err2str returns a static string for any code.
                let text = unsafe { CStr::from_ptr((self.err2str)(failed.err)) }
                    .to_string_lossy()
                    .into_owned();
                let key = m.key(rows[at]).to_vec();
                return Some((
                    topics[*group].clone(),
                    *partition,
                    queued,
                    failed.err,
                    text,
                    key,
                ));
            }
        }
        None
    }
}
