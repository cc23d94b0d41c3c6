//! `pfifo [limit N]` and `bfifo [limit SIZE]`: the limit word (the two disciplines' only one).

use crate::qdisc::words::{count_value, expect_value, SpecError, Tokens};
use crate::units::parse_size;

/// The `limit` of a fifo's words: packets for `pfifo`, a size for `bfifo`; None if not given.
pub(crate) fn parse_fifo_limit(
    t: &mut Tokens<'_>,
    kind: &'static str,
    packets: bool,
) -> Result<Option<u32>, SpecError> {
    let mut limit = None;
    while let Some(w) = t.next() {
        if w != "limit" {
            return Err(SpecError::unknown(w, kind, &["limit"]));
        }
        limit = Some(if packets {
            count_value(t, "limit", 1, u32::MAX)?
        } else {
            let v = expect_value(t, "limit", "a size such as 1514000b")?;
            let b = parse_size(v).map_err(|e| SpecError::value(v, &e.to_string()))?;
            u32::try_from(b).map_err(|_| SpecError::value(v, "limit must be below 4Gb"))?
        });
    }
    Ok(limit)
}
