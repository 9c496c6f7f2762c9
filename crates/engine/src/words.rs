//! The one way the engine declares a vocabulary: a set of protocol words (statuses, message types,
//! verdicts…), each spelled once. [`words!`] makes a closed enum (`ALL` in protocol order, `as_str`,
//! exact and case-insensitive parsing, the comma-separated list for messages, `Display`, serde as the
//! word); its `open` form adds an `Other(String)` variant for words read from files that foreign
//! writers may spell otherwise, kept verbatim so a rewrite never loses them.

/// What every closed vocabulary offers, so a check can take the vocabulary as a type parameter.
pub(crate) trait Vocabulary: Copy + Sized + 'static {
    /// The protocol's spelling.
    fn word(self) -> &'static str;
    /// The word in any letter case.
    fn parse_word_loose(s: &str) -> Option<Self>;
    /// `A, B, C`: every word.
    fn every_word() -> String;
}

/// Declares a vocabulary. `words!(Doc Name { Variant = "word", … })` is closed: parsing answers
/// `None` for any other word, and deserialising refuses it. `words!(open Doc Name { … })` keeps any
/// other word as `Name::Other(text)` (`null` as an empty `Other`, a non-string as its JSON text).
macro_rules! words {
    (open $(#[$doc:meta])* $vis:vis $name:ident { $($(#[$vdoc:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        $vis enum $name {
            $($(#[$vdoc])* $variant,)+
            /// A value this engine does not know, kept verbatim.
            Other(String),
        }

        impl $name {
            /// Every word this engine knows, in protocol order (without [`Self::Other`]).
            $vis const ALL: &'static [Self] = &[$(Self::$variant),+];

            /// True when `s` is one of [`Self::ALL`], spelled exactly.
            $vis fn is_known(s: &str) -> bool {
                !matches!(Self::parse(s), Self::Other(_))
            }

            /// `a, b, c`: every known word, for messages.
            $vis fn list() -> String {
                Self::ALL.iter().map(|w| w.as_str()).collect::<Vec<_>>().join(", ")
            }

            /// The protocol's spelling.
            $vis fn as_str(&self) -> &str {
                match self {
                    $(Self::$variant => $text,)+
                    Self::Other(s) => s,
                }
            }

            /// Parses the protocol's spelling; anything else is kept as [`Self::Other`].
            $vis fn parse(s: &str) -> Self {
                match s {
                    $($text => Self::$variant,)+
                    other => Self::Other(other.to_owned()),
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.pad(self.as_str())
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> ::std::result::Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> ::std::result::Result<Self, D::Error> {
                use ::serde_json::Value;
                Ok(match <Value as ::serde::Deserialize>::deserialize(d)? {
                    Value::String(s) => Self::parse(&s),
                    Value::Null => Self::Other(String::new()),
                    other => Self::Other(other.to_string()),
                })
            }
        }
    };
    ($(#[$doc:meta])* $vis:vis $name:ident { $($(#[$vdoc:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        $vis enum $name {
            $($(#[$vdoc])* $variant,)+
        }

        impl $name {
            /// Every word, in protocol order.
            $vis const ALL: &'static [Self] = &[$(Self::$variant),+];

            /// The protocol's spelling.
            $vis const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text,)+
                }
            }

            /// The word spelled exactly as the protocol does; `None` for anything else.
            $vis fn parse(s: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|w| w.as_str() == s)
            }

            /// The word in any letter case, surrounding blanks ignored.
            $vis fn parse_loose(s: &str) -> Option<Self> {
                let s = s.trim();
                Self::ALL.iter().copied().find(|w| w.as_str().eq_ignore_ascii_case(s))
            }

            /// `A, B, C`: every word, for messages.
            $vis fn list() -> String {
                Self::ALL.iter().map(|w| w.as_str()).collect::<Vec<_>>().join(", ")
            }
        }

        impl $crate::words::Vocabulary for $name {
            fn word(self) -> &'static str {
                self.as_str()
            }
            fn parse_word_loose(s: &str) -> Option<Self> {
                Self::parse_loose(s)
            }
            fn every_word() -> String {
                Self::list()
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.pad(self.as_str())
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> ::std::result::Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> ::std::result::Result<Self, D::Error> {
                let s = <String as ::serde::Deserialize>::deserialize(d)?;
                Self::parse(&s).ok_or_else(|| {
                    <D::Error as ::serde::de::Error>::custom(format!(
                        "{s:?} is not one of {}",
                        Self::list()
                    ))
                })
            }
        }
    };
}

pub(crate) use words;

#[cfg(test)]
mod tests {
    use crate::conductor::model::{StepStatus, WorkflowStatus};

    #[test]
    fn a_word_pads_to_a_width_as_its_text_would() {
        assert_eq!(format!("[{:<11}]", StepStatus::Completed), "[completed  ]");
        assert_eq!(format!("[{:>8}]", WorkflowStatus::Failed), "[  failed]");
        assert_eq!(format!("[{:<5}]", StepStatus::Other("x".into())), "[x    ]");
    }
}
