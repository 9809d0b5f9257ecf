//! Timestamp text: fixed-width UTC ISO-8601 with microseconds and `+00:00`.
//!
//! [`format()`] always writes `YYYY-MM-DDTHH:MM:SS.ffffff+00:00` (32 characters), so the
//! lexical order of stored text equals time order. [`parse()`] reads that form and every form
//! Python's `datetime.isoformat()` produces for timezone-aware datetimes (no fraction,
//! milliseconds, a space or other one-character separator, offsets other than UTC, offsets
//! with seconds), plus a trailing `Z`. Naive timestamps (no offset) are refused.

use time::{Date, Duration, Month, OffsetDateTime, PrimitiveDateTime, Time, UtcOffset};

use crate::error::{Error, Result};

/// Formats `t` in UTC as `YYYY-MM-DDTHH:MM:SS.ffffff+00:00`.
///
/// Years outside 0..=9999 are clamped to that range's edge (Python cannot represent them).
pub fn format(t: OffsetDateTime) -> String {
    let t = t.to_offset(UtcOffset::UTC);
    let year = t.year().clamp(0, 9999);
    format!(
        "{year:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}+00:00",
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.microsecond()
    )
}

/// Parses an ISO-8601 timestamp with an offset and returns it in UTC, truncated to microseconds.
///
/// # Errors
/// `managed_input_invalid` when the text is not an ISO-8601 timestamp or has no offset
/// (message mentions "timezone-aware").
pub fn parse(text: &str) -> Result<OffsetDateTime> {
    let invalid = || Error::managed_input_validation(format!("invalid timestamp '{text}'"));
    let bytes = text.as_bytes();
    if bytes.len() < 11 || !text.is_ascii() {
        return Err(invalid());
    }
    let date = parse_date(&text[..10]).ok_or_else(invalid)?;
    let rest = &text[11..];
    // split time and offset
    let split = rest.find(['+', '-', 'Z', 'z']).ok_or_else(|| {
        Error::managed_input_validation(format!(
            "timestamp '{text}' must be timezone-aware (it has no UTC offset)"
        ))
    })?;
    let (time_text, offset_text) = rest.split_at(split);
    let time = parse_time(time_text).ok_or_else(invalid)?;
    let offset = parse_offset(offset_text).ok_or_else(invalid)?;
    let local = PrimitiveDateTime::new(date, time).assume_utc();
    local.checked_sub(offset).ok_or_else(invalid)
}

fn digits(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn parse_date(s: &str) -> Option<Date> {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let year = i32::try_from(digits(&s[..4])?).ok()?;
    let month = Month::try_from(u8::try_from(digits(&s[5..7])?).ok()?).ok()?;
    let day = u8::try_from(digits(&s[8..10])?).ok()?;
    Date::from_calendar_date(year, month, day).ok()
}

/// `HH[:MM[:SS[.f+]]]`; the fraction is 1..=9 digits, truncated to microseconds.
fn parse_time(s: &str) -> Option<Time> {
    let (hms, fraction) = match s.split_once(['.', ',']) {
        Some((hms, fraction)) => (hms, Some(fraction)),
        None => (s, None),
    };
    let mut parts = hms.split(':');
    let mut field = |required: bool| -> Option<u8> {
        match parts.next() {
            Some(p) if p.len() == 2 => u8::try_from(digits(p)?).ok(),
            Some(_) => None,
            None if required => None,
            None => Some(0),
        }
    };
    let hour = field(true)?;
    let minute = field(false)?;
    let second = field(false)?;
    if parts.next().is_some() {
        return None;
    }
    let micro = match fraction {
        None => 0,
        Some(f) if (1..=9).contains(&f.len()) => {
            let value = digits(f)?;
            let scaled = u64::from(value) * 10u64.pow(9 - u32::try_from(f.len()).ok()?);
            u32::try_from(scaled / 1000).ok()?
        }
        Some(_) => return None,
    };
    if fraction.is_some() && hms.len() != 8 {
        return None;
    }
    Time::from_hms_micro(hour, minute, second, micro).ok()
}

/// `Z`, `±HH:MM`, `±HH:MM:SS[.ffffff]` or `±HHMM`.
fn parse_offset(s: &str) -> Option<Duration> {
    if s == "Z" || s == "z" {
        return Some(Duration::ZERO);
    }
    let sign = match s.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let body = &s[1..];
    let (hours, minutes, seconds, micros) = if body.len() == 4 && !body.contains(':') {
        (digits(&body[..2])?, digits(&body[2..])?, 0, 0)
    } else {
        let (hms, fraction) = match body.split_once('.') {
            Some((hms, f)) => (hms, Some(f)),
            None => (body, None),
        };
        let parts: Vec<&str> = hms.split(':').collect();
        if !(parts.len() == 2 || parts.len() == 3) || parts.iter().any(|p| p.len() != 2) {
            return None;
        }
        let seconds = if parts.len() == 3 {
            digits(parts[2])?
        } else {
            0
        };
        let micros = match fraction {
            None => 0,
            Some(f) if f.len() == 6 && parts.len() == 3 => digits(f)?,
            Some(_) => return None,
        };
        (digits(parts[0])?, digits(parts[1])?, seconds, micros)
    };
    if hours > 23 || minutes > 59 || seconds > 59 {
        return None;
    }
    let total = Duration::hours(i64::from(hours))
        + Duration::minutes(i64::from(minutes))
        + Duration::seconds(i64::from(seconds))
        + Duration::microseconds(i64::from(micros));
    Some(if sign < 0 { -total } else { total })
}

/// Serde helpers for `#[serde(with = "m3_types::timestamp::serde")]` on `OffsetDateTime` fields.
pub mod serde {
    use serde::{Deserialize, Deserializer, Serializer};
    use time::OffsetDateTime;

    /// Serializes with [`super::format()`].
    ///
    /// # Errors
    /// Only the serializer's own errors.
    pub fn serialize<S: Serializer>(t: &OffsetDateTime, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format(*t))
    }

    /// Deserializes with [`super::parse()`].
    ///
    /// # Errors
    /// Text that [`super::parse()`] refuses.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<OffsetDateTime, D::Error> {
        let text = String::deserialize(d)?;
        super::parse(&text).map_err(serde::de::Error::custom)
    }

    /// The same for `Option<OffsetDateTime>` (`None` is `null`).
    pub mod option {
        use serde::{Deserialize, Deserializer, Serializer};
        use time::OffsetDateTime;

        /// Serializes `Some` with [`crate::timestamp::format()`], `None` as `null`.
        ///
        /// # Errors
        /// Only the serializer's own errors.
        pub fn serialize<S: Serializer>(
            t: &Option<OffsetDateTime>,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            match t {
                Some(t) => s.serialize_str(&crate::timestamp::format(*t)),
                None => s.serialize_none(),
            }
        }

        /// Deserializes `null` or text accepted by [`crate::timestamp::parse()`].
        ///
        /// # Errors
        /// Text that [`crate::timestamp::parse()`] refuses.
        pub fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Option<OffsetDateTime>, D::Error> {
            match Option::<String>::deserialize(d)? {
                Some(text) => crate::timestamp::parse(&text)
                    .map(Some)
                    .map_err(serde::de::Error::custom),
                None => Ok(None),
            }
        }
    }
}
