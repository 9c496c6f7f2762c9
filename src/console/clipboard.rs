//! Yanking to the system clipboard with OSC 52: the terminal (local, over SSH, or through tmux with
//! `set-clipboard on`, its default `external` forwarding it) puts the text on the clipboard. No
//! clipboard library, no X11/Wayland connection: only bytes on the terminal.

/// The largest text yanked (terminals cap OSC 52 payloads; an id or a path is far smaller).
pub(crate) const MAX_YANK_BYTES: usize = 64 * 1024;

/// The OSC 52 sequence that sets the clipboard (`c`) to `text`: `ESC ] 52 ; c ; BASE64 BEL`.
/// Text longer than [`MAX_YANK_BYTES`] is cut at a character boundary.
pub(crate) fn osc52(text: &str) -> String {
    let mut end = text.len().min(MAX_YANK_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("\x1b]52;c;{}\x07", base64(&text.as_bytes()[..end]))
}

/// What `y` copies of one id or path: its characters as the screen shows them, without the control
/// characters (ESC, newlines, C1) an agent may have written into a file of the root; the clipboard
/// never receives a sequence the screen would not have shown.
pub(crate) fn printable(text: &str) -> String {
    text.chars().filter(|c| !c.is_control()).collect()
}

/// Standard base64 with padding (RFC 4648 §4).
pub(crate) fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_rfc_vectors() {
        for (plain, enc) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(plain.as_bytes()), enc, "{plain}");
        }
    }

    #[test]
    fn printable_drops_escapes_newlines_and_c1_controls() {
        assert_eq!(
            printable("src/\x1b]52;c;ZXZpbA==\x07a\nb\r\u{9b}31m.rs"),
            "src/]52;c;ZXZpbA==ab31m.rs"
        );
    }

    #[test]
    fn osc52_wraps_the_text_and_cuts_at_a_character_boundary() {
        assert_eq!(osc52("wf_deploy_42"), "\x1b]52;c;d2ZfZGVwbG95XzQy\x07");
        let long = "é".repeat(MAX_YANK_BYTES);
        let seq = osc52(&long);
        assert!(seq.len() < MAX_YANK_BYTES * 2);
        assert!(seq.ends_with('\x07'));
    }
}
