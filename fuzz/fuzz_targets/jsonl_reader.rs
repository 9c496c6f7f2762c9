//! The JSONL reader: any bytes in `queue.jsonl` are read (forward, from an offset, and from the end)
//! without a panic, and the tail agrees with the forward read.
#![no_main]

use std::io::Write;

use libfuzzer_sys::fuzz_target;
use pantheon::engine::bus::queue::{self, Filter};

fuzz_target!(|data: &[u8]| {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(data).unwrap();
    f.flush().unwrap();
    let all = queue::read(f.path(), &Filter::default()).expect("reading a plain file");
    for n in [1usize, 3, 100] {
        let t = queue::tail(f.path(), n, &Filter::default()).expect("tailing a plain file");
        let want: Vec<_> = all
            .messages
            .iter()
            .rev()
            .take(n)
            .rev()
            .map(|m| m.id.clone())
            .collect();
        let got: Vec<_> = t.messages.iter().map(|m| m.id.clone()).collect();
        assert_eq!(got, want, "tail {n} disagrees with the forward read");
    }
    let half = (data.len() / 2) as u64;
    let _ = queue::read_from(f.path(), half);
    let mut cursor = queue::QueueCursor::new(f.path());
    let polled = cursor.poll().expect("polling a plain file");
    assert_eq!(polled.len(), all.messages.len());
});
