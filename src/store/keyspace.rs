//! Points between record keys, for finding where a table stops being readable.
//!
//! Crucible's record keys are ASCII (ULIDs, `<ulid>-<seq>`, hex digests, names), and the
//! engine keeps a table's records in the byte order of their keys. A [`Point`] is a key of
//! fixed length over an ASCII alphabet, read as a number in base [`BASE`], so that the
//! points between two keys can be halved: that is how a walk finds the last key it can
//! read before a damaged stretch and the first one after it, with a few hundred reads.

/// The characters a point is spelled with, in byte order: printable ASCII without space
/// and backslash (which a key in `⟨…⟩` would have to escape).
const ALPHABET: &[u8] = b"!\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[]^_`abcdefghijklmnopqrstuvwxyz{|}~";
const BASE: u32 = ALPHABET.len() as u32;
/// The length of every point: longer than any key crucible writes (digests are 64).
pub(super) const LEN: usize = 72;

/// A key of [`LEN`] characters of [`ALPHABET`], as digits, most significant first.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Point([u8; LEN]);

impl Point {
    /// The lowest point: below every key but the ones starting with a space or below.
    pub(super) fn lowest() -> Point {
        Point([0; LEN])
    }

    /// The highest point: above every key crucible writes.
    pub(super) fn highest() -> Point {
        Point([(BASE - 1) as u8; LEN])
    }

    /// The highest point at or below `key` in byte order.
    pub(super) fn at_or_below(key: &str) -> Point {
        let bytes = key.as_bytes();
        let mut digits = [0u8; LEN];
        for (i, slot) in digits.iter_mut().enumerate() {
            let Some(&b) = bytes.get(i) else {
                // `key` is a prefix of every point that continues it, so it lies below
                // them all: the point below is the one just before this prefix.
                return Point(digits).before();
            };
            match ALPHABET.iter().position(|&a| a == b) {
                Some(d) => *slot = d as u8,
                None => {
                    // A character between two of the alphabet: the lower one, then
                    // the highest continuation.
                    match ALPHABET.iter().rposition(|&a| a < b) {
                        Some(d) => {
                            *slot = d as u8;
                            for rest in digits.iter_mut().skip(i + 1) {
                                *rest = (BASE - 1) as u8;
                            }
                            return Point(digits);
                        }
                        None => return Point(digits).before(),
                    }
                }
            }
        }
        Point(digits)
    }

    /// The point just below this one (the lowest stays itself).
    fn before(mut self) -> Point {
        for d in self.0.iter_mut().rev() {
            if *d > 0 {
                *d -= 1;
                return self;
            }
            *d = (BASE - 1) as u8;
        }
        Point::lowest()
    }

    /// This point plus `step` (the highest when that passes it).
    pub(super) fn plus(&self, step: &Point) -> Point {
        let mut out = [0u8; LEN];
        let mut carry = 0u32;
        for i in (0..LEN).rev() {
            let sum = self.0[i] as u32 + step.0[i] as u32 + carry;
            out[i] = (sum % BASE) as u8;
            carry = sum / BASE;
        }
        if carry > 0 {
            Point::highest()
        } else {
            Point(out)
        }
    }

    /// The point halfway from `self` up to `other` (`self` when they are next to each
    /// other).
    pub(super) fn halfway_to(&self, other: &Point) -> Point {
        // (a + b) / 2, digit by digit with a carry, then halved from the top.
        let mut sum = [0u32; LEN + 1];
        let mut carry = 0u32;
        for i in (0..LEN).rev() {
            let s = self.0[i] as u32 + other.0[i] as u32 + carry;
            sum[i + 1] = s % BASE;
            carry = s / BASE;
        }
        sum[0] = carry;
        let mut out = [0u8; LEN];
        let mut rest = sum[0];
        for i in 0..LEN {
            let cur = rest * BASE + sum[i + 1];
            out[i] = (cur / 2) as u8;
            rest = cur % 2;
        }
        Point(out)
    }

    /// The step of one in the last digit.
    pub(super) fn one() -> Point {
        let mut p = Point([0; LEN]);
        p.0[LEN - 1] = 1;
        p
    }

    /// The point as a key.
    pub(super) fn key(&self) -> String {
        self.0
            .iter()
            .map(|&d| ALPHABET[d as usize] as char)
            .collect()
    }
}

/// `key` inside `⟨…⟩`, escaped.
pub(super) fn quoted(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 2);
    out.push('⟨');
    for c in key.chars() {
        if c == '⟩' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('⟩');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_keep_the_order_of_keys() {
        let keys = [
            "01ARZ3NDEKTSV4RRFFQ69G5FAV",
            "01ARZ3NDEKTSV4RRFFQ69G5FAV-000000000001",
            "01ARZ3NDEKTSV4RRFFQ69G5FAW",
            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            "schema",
        ];
        for pair in keys.windows(2) {
            let (a, b) = (Point::at_or_below(pair[0]), Point::at_or_below(pair[1]));
            assert!(a < b, "{} / {}", pair[0], pair[1]);
            assert!(a.key().as_str() <= pair[0], "{}", pair[0]);
            assert!(b.key().as_str() <= pair[1]);
            // The point after a key's floor is above the key.
            assert!(a.plus(&Point::one()).key().as_str() > pair[0]);
        }
        assert!(Point::lowest() < Point::highest());
        assert!(Point::highest().key().as_str() > "~~~");
    }

    #[test]
    fn halfway_lies_between_and_adjacent_points_meet() {
        let a = Point::at_or_below("01A");
        let b = Point::at_or_below("01Z");
        let m = a.halfway_to(&b);
        assert!(a < m && m < b);
        let next = a.plus(&Point::one());
        assert_eq!(a.halfway_to(&next), a);
        assert_eq!(
            Point::lowest().halfway_to(&Point::highest()).0[0] as u32,
            (BASE - 1) / 2
        );
        assert_eq!(
            Point::highest().plus(&{
                let two = Point::one().plus(&Point::one());
                let four = two.plus(&two);
                four.plus(&four)
            }),
            Point::highest()
        );
    }

    #[test]
    fn keys_are_quoted_for_a_range() {
        assert_eq!(quoted("01A"), "⟨01A⟩");
        assert_eq!(quoted("a⟩b\\"), "⟨a\\⟩b\\\\⟩");
    }
}
