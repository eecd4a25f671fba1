//! `Timestamp` and `TxId`: the two clocks of bitemporal history.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// A point in time: UTC microseconds since 1970-01-01T00:00:00Z, within 1970..=9999.
///
/// Shown and parsed as RFC 3339 with exactly six fractional digits (`2024-05-01T12:00:00.000000Z`),
/// the form the transaction log hashes.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The earliest time strata stores: 1970-01-01T00:00:00.000000Z.
    pub const MIN: Timestamp = Timestamp(0);
    /// The latest time strata stores: 9999-12-30T22:00:00Z, the last microsecond that
    /// jiff (and so RFC 3339 with any offset) represents.
    pub const MAX: Timestamp = Timestamp(253_402_207_200_000_000);

    /// The time from microseconds since the epoch.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the time is before 1970 or after 9999.
    pub fn from_micros(micros: i64) -> Result<Self> {
        if (Self::MIN.0..=Self::MAX.0).contains(&micros) {
            Ok(Timestamp(micros))
        } else {
            Err(Error::invalid_input(format!(
                "time {micros} µs since the epoch is outside 1970-01-01..9999-12-30; give a time in that range"
            )))
        }
    }

    /// The time from microseconds since the epoch, moved into 1970..=9999 when outside (for file
    /// mtimes, which may be anything).
    pub fn saturating_from_micros(micros: i64) -> Self {
        Timestamp(micros.clamp(Self::MIN.0, Self::MAX.0))
    }

    /// The wall clock now (clamped into range).
    pub fn now() -> Self {
        Self::saturating_from_micros(jiff::Timestamp::now().as_microsecond())
    }

    /// Microseconds since the epoch.
    pub fn as_micros(self) -> i64 {
        self.0
    }

    /// The next microsecond, saturating at [`Timestamp::MAX`].
    pub fn next(self) -> Self {
        Timestamp((self.0 + 1).min(Self::MAX.0))
    }

    /// The RFC 3339 text with six fractional digits.
    pub fn to_rfc3339(self) -> String {
        self.to_string()
    }
}

/// The proleptic Gregorian (year, month, day) of `days` since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`), for days from 0 on.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

impl fmt::Display for Timestamp {
    /// `YYYY-MM-DDTHH:MM:SS.ffffffZ`, written by hand: the log hashes this text for every op
    /// a read checks, and formatting through `strftime` showed in profiles of a session's
    /// resume (tested equal to jiff's `%Y-%m-%dT%H:%M:%S%.6fZ`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const DAY: i64 = 86_400_000_000;
        let (days, in_day) = (self.0.div_euclid(DAY), self.0.rem_euclid(DAY));
        let (year, month, day) = civil_from_days(days);
        let secs = in_day / 1_000_000;
        let mut text = *b"0000-00-00T00:00:00.000000Z";
        let mut put = |at: usize, width: usize, mut value: i64| {
            for i in (at..at + width).rev() {
                // `value % 10` is a digit 0..=9: the cast cannot truncate.
                text[i] = b'0' + (value % 10) as u8;
                value /= 10;
            }
        };
        put(0, 4, year);
        put(5, 2, month);
        put(8, 2, day);
        put(11, 2, secs / 3600);
        put(14, 2, secs / 60 % 60);
        put(17, 2, secs % 60);
        put(20, 6, in_day % 1_000_000);
        // Only ASCII digits were written into ASCII text.
        f.write_str(std::str::from_utf8(&text).map_err(|_| fmt::Error)?)
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Timestamp({self})")
    }
}

impl FromStr for Timestamp {
    type Err = Error;

    /// Parses RFC 3339 (any offset, at most microsecond precision).
    fn from_str(text: &str) -> Result<Self> {
        let ts: jiff::Timestamp = text.parse().map_err(|e| {
            Error::invalid_input(format!(
                "{text:?} is not an RFC 3339 time between 1970 and 9999 ({e}); write e.g. 2024-05-01T12:00:00Z"
            ))
        })?;
        if ts.subsec_nanosecond() % 1000 != 0 {
            return Err(Error::invalid_input(format!(
                "{text:?} is more precise than a microsecond; strata keeps microseconds"
            )));
        }
        Timestamp::from_micros(ts.as_microsecond()).map_err(|_| {
            Error::invalid_input(format!(
                "{text:?} is outside 1970-01-01..9999-12-30; give a time in that range"
            ))
        })
    }
}

impl Timestamp {
    /// Parses a time a person gave (RFC 3339, any offset): digits finer than a microsecond are
    /// truncated (as `date +%FT%T.%NZ` prints nine), and an error says what is accepted without
    /// the date library's own words.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for text that is not RFC 3339 or a time outside
    /// 1970-01-01..9999-12-30.
    pub fn parse_given(text: &str) -> Result<Self> {
        const EXAMPLE: &str = "write e.g. 2024-05-01T12:00:00Z or 2024-05-01T14:00:00+02:00";
        let ts: jiff::Timestamp = match text.parse() {
            Ok(ts) => ts,
            // A well-formed time jiff cannot hold (past 9999-12-30 with its offset).
            Err(_) if far(text) => {
                return Err(Error::invalid_input(format!(
                    "{text:?} is outside the times strata keeps, {} to {}",
                    Timestamp::MIN,
                    Timestamp::MAX
                )));
            }
            Err(_) => {
                return Err(Error::invalid_input(format!(
                    "{text:?} is not an RFC 3339 time; {EXAMPLE}"
                )));
            }
        };
        let micros = ts.as_microsecond();
        Timestamp::from_micros(micros).map_err(|_| {
            Error::invalid_input(format!(
                "{text:?} is outside the times strata keeps, {} to {}",
                Timestamp::MIN,
                Timestamp::MAX
            ))
        })
    }
}

/// Whether `text` reads as an RFC 3339 time in the year 9999 or a year with more digits: one
/// too far for the date library rather than malformed.
fn far(text: &str) -> bool {
    let year: String = text.chars().take_while(char::is_ascii_digit).collect();
    (year.len() > 4 || (year.len() == 4 && year.as_str() >= "9999"))
        && text[year.len()..].starts_with('-')
}

impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_string())
    }
}

impl<'de> serde::Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A transaction's number: counts up from 1 in commit order.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct TxId(pub u64);

impl fmt::Display for TxId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The hand-written text is jiff's, over the whole range strata keeps.
        #[test]
        fn display_is_jiffs_rfc3339(micros in Timestamp::MIN.0..=Timestamp::MAX.0) {
            let jiff = jiff::Timestamp::from_microsecond(micros)
                .map(|ts| ts.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string());
            proptest::prop_assert_eq!(Ok(Timestamp(micros).to_string()), jiff.map_err(|_| ()));
        }
    }

    #[test]
    fn display_at_the_ends_of_the_range_and_of_days() {
        for micros in [
            Timestamp::MIN.0,
            Timestamp::MAX.0,
            86_400_000_000 - 1,
            951_782_400_000_000, // 2000-02-29
            1_709_164_800_123_456,
        ] {
            let jiff = jiff::Timestamp::from_microsecond(micros)
                .map(|ts| ts.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string())
                .ok();
            assert_eq!(Some(Timestamp(micros).to_string()), jiff, "{micros}");
        }
    }

    #[test]
    fn given_times_truncate_nanoseconds_and_say_their_range() -> Result<()> {
        let t = Timestamp::parse_given("2024-05-01T12:00:00.123456789Z")?;
        assert_eq!(t.to_string(), "2024-05-01T12:00:00.123456Z");
        let far = Timestamp::parse_given("9999-12-31T23:59:59Z")
            .map(|_| ())
            .unwrap_err();
        assert!(
            far.to_string().contains("outside the times strata keeps"),
            "{far}"
        );
        assert!(!far.to_string().contains("overflow"), "{far}");
        let early = Timestamp::parse_given("1969-12-31T23:59:59Z")
            .map(|_| ())
            .unwrap_err();
        assert!(early.to_string().contains("outside"), "{early}");
        let bad = Timestamp::parse_given("yesterday").map(|_| ()).unwrap_err();
        assert!(bad.to_string().contains("not an RFC 3339 time"), "{bad}");
        Ok(())
    }

    #[test]
    fn rfc3339_round_trips_with_microseconds() -> Result<()> {
        let t: Timestamp = "2024-05-01T12:00:00.5+02:00".parse()?;
        assert_eq!(t.to_string(), "2024-05-01T10:00:00.500000Z");
        assert_eq!(t.to_string().parse::<Timestamp>()?, t);
        assert_eq!(Timestamp::MIN.to_string(), "1970-01-01T00:00:00.000000Z");
        assert_eq!(Timestamp::MAX.to_string(), "9999-12-30T22:00:00.000000Z");
        assert!(jiff::Timestamp::from_microsecond(Timestamp::MAX.as_micros()).is_ok());
        Ok(())
    }

    #[test]
    fn out_of_range_and_too_precise_are_refused() {
        for bad in [
            "1969-12-31T23:59:59Z",
            "+10000-01-01T00:00:00Z",
            "2024-01-01T00:00:00.0000001Z",
            "yesterday",
        ] {
            let err = bad.parse::<Timestamp>().unwrap_err();
            assert!(matches!(err, Error::InvalidInput { .. }), "{bad}: {err}");
        }
        assert!(Timestamp::from_micros(-1).is_err());
        assert!(Timestamp::from_micros(Timestamp::MAX.as_micros() + 1).is_err());
        assert_eq!(Timestamp::saturating_from_micros(-5), Timestamp::MIN);
    }
}
