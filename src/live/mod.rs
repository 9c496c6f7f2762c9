//! The watched model of a root: file-system notifications -> incremental reads -> an immutable snapshot.
