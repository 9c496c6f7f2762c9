//! Who an act is journaled as: the same answer for the console, the CLI, the supervisor and the MCP
//! server, so a service or container without `USER` still records a person, not `unknown`.

use crate::engine::{Origin, clean_actor};

/// `--actor` when given, else `$USER` / `$LOGNAME`, else the login name of the process's uid in the
/// password database, else `uid N`.
pub fn operator_name(actor: Option<&str>) -> String {
    let given = Origin::new(actor, "cli").actor;
    if actor.is_some() || given != "unknown" {
        return given;
    }
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    login_name(uid).unwrap_or_else(|| format!("uid {uid}"))
}

/// The journal origin of an act by `source` (`cli`, `console`, `supervisor`, `mcp`), named as
/// [`operator_name`] says.
pub(crate) fn origin(actor: Option<&str>, source: &str) -> Origin {
    Origin::new(Some(&operator_name(actor)), source)
}

/// The login name of `uid` (`getpwuid_r`), if the password database has one.
fn login_name(uid: libc::uid_t) -> Option<String> {
    let mut pwd = std::mem::MaybeUninit::<libc::passwd>::zeroed();
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwuid_r writes only into `pwd` and `buf` (whose length it is given) and sets `out`
    // to `pwd` on success; `pw_name` then points into `buf`, which outlives the read below.
    let rc =
        unsafe { libc::getpwuid_r(uid, pwd.as_mut_ptr(), buf.as_mut_ptr(), buf.len(), &mut out) };
    if rc != 0 || out.is_null() {
        return None;
    }
    // SAFETY: `out` is non-null, so `pwd` was filled in.
    let name = unsafe { pwd.assume_init_ref().pw_name };
    if name.is_null() {
        return None;
    }
    // SAFETY: a non-null `pw_name` is a NUL-terminated string inside `buf`.
    let name = unsafe { std::ffi::CStr::from_ptr(name) }.to_string_lossy();
    Some(clean_actor(&name)).filter(|n| !n.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_actor_wins_and_is_cleaned() {
        assert_eq!(operator_name(Some("  alice\u{7}")), "alice");
        assert_eq!(origin(Some("bob"), "mcp").actor, "bob");
        assert_eq!(origin(Some("bob"), "mcp").source, "mcp");
    }

    #[test]
    fn the_uid_has_a_login_name_here() {
        // SAFETY: as above.
        let uid = unsafe { libc::getuid() };
        let name = login_name(uid).expect("the test's uid is in the password database");
        assert!(!name.is_empty() && name != "unknown");
    }
}
