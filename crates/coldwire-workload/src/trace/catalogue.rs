//! The objects a trace names, for `coldwire origin --trace`: every path logged with a
//! status below 400 is an object, its size the largest logged with `200` (or, with no
//! `200`, the largest logged at all: a `304` logs 0); its id a hash of the path, so a
//! client can name the body it expects without the catalogue. Paths logged only with
//! errors are not objects (the origin answers them 404, as the logged server did).

use std::collections::HashMap;

use super::Record;

/// One object of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceObject {
    /// Its id: [`path_id`] of its path (names its body).
    pub id: u64,
    /// Its body size in bytes.
    pub size: u64,
}

/// The id of the object at `path`: FNV-1a of its bytes.
pub fn path_id(path: &str) -> u64 {
    path.bytes().fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The objects of a trace, by path.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Catalogue {
    objects: HashMap<String, (TraceObject, bool)>,
    first_time_ms: i64,
}

impl Catalogue {
    /// The objects `records` name.
    pub fn from_records(records: &[Record]) -> Catalogue {
        let mut objects: HashMap<String, (TraceObject, bool)> = HashMap::new();
        for record in records.iter().filter(|record| record.status < 400) {
            let path = record.path();
            let ok = record.status == 200;
            let entry = objects.entry(path.to_owned()).or_insert((
                TraceObject {
                    id: path_id(path),
                    size: record.size,
                },
                ok,
            ));
            let (object, had_ok) = entry;
            match (ok, *had_ok) {
                (true, false) => {
                    object.size = record.size;
                    *had_ok = true;
                }
                (true, true) | (false, false) => object.size = object.size.max(record.size),
                (false, true) => {}
            }
        }
        Catalogue {
            objects,
            first_time_ms: records
                .iter()
                .map(|record| record.time_ms)
                .min()
                .unwrap_or(0),
        }
    }

    /// The trace's first timestamp, milliseconds since the epoch (the objects'
    /// `Last-Modified`).
    pub fn first_time_ms(&self) -> i64 {
        self.first_time_ms
    }

    /// The object at `path` (a request target's path and query), if the trace names it.
    pub fn get(&self, path: &str) -> Option<TraceObject> {
        self.objects.get(path).map(|(object, _)| *object)
    }

    /// How many objects.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// True when the trace named no object.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// Their total size in bytes.
    pub fn total_bytes(&self) -> u64 {
        self.objects.values().map(|(object, _)| object.size).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(url: &str, status: u16, size: u64) -> Record {
        Record {
            time_ms: 0,
            client: "c".into(),
            method: "GET".into(),
            url: url.into(),
            status,
            size,
        }
    }

    #[test]
    fn sizes_come_from_200s_and_errors_are_not_objects() {
        let catalogue = Catalogue::from_records(&[
            record("/a", 304, 0),
            record("/a", 200, 100),
            record("/a", 304, 0),
            record("http://host/a", 200, 120),
            record("/b", 304, 0),
            record("/c", 404, 300),
            record("/d", 206, 10),
            record("/d", 206, 30),
        ]);
        assert_eq!(catalogue.len(), 3);
        assert_eq!(
            catalogue.get("/a"),
            Some(TraceObject {
                id: path_id("/a"),
                size: 120
            })
        );
        assert_eq!(catalogue.get("/b").map(|o| o.size), Some(0));
        assert_eq!(catalogue.get("/c"), None);
        assert_eq!(catalogue.get("/d").map(|o| o.size), Some(30));
        assert_ne!(path_id("/a"), path_id("/b"));
        assert_eq!(catalogue.total_bytes(), 150);
    }
}
