//! Event-name encoding: any key becomes one safe file-name component that decodes back to the key,
//! and any wait pattern compiles or is refused, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pantheon::engine::bus::events::{EventPattern, event_file_name};
use pantheon::engine::store::ids::{decode_key, encode_key};

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    let enc = encode_key(&s);
    assert!(
        enc.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-%".contains(&b)),
        "{enc}"
    );
    assert!(enc != "." && enc != "..");
    assert_eq!(decode_key(&enc), s);
    let name = event_file_name("TASK_COMPLETE", Some(&s));
    assert!(!name.contains('/') && !name.contains('\0'));
    if let Ok(p) = EventPattern::new(&s) {
        let _ = p.matches(&name);
    }
});
