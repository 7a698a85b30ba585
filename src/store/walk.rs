//! A walk of one table in key ranges, around what the engine cannot read back: when a
//! range fails it finds, by halving (see [`super::keyspace`]), the last key readable
//! before the damage and the first after it, and goes on from there.

use serde_json::{Value, json};

use super::conn::Store;
use super::error::{Result, is_unreadable};
use super::keyspace::{Point, quoted};
use crate::protocol::check::Damaged;

/// Records read at a time.
const PAGE: usize = 1000;

/// What one read of a key range asks for.
#[derive(Clone, Copy)]
pub(super) enum Fetch<'a> {
    /// Only the keys (a check).
    Keys,
    /// Whole records (a rebuild).
    Records,
    /// These fields, as a `SELECT` names them (loading what the daemon starts with).
    Fields(&'a str),
}

/// One table's readable records (key, and the record without its id when fetched).
pub(super) struct Walked {
    pub(super) rows: Vec<(String, Value)>,
    pub(super) damaged: Vec<Damaged>,
}

impl Store {
    /// The records of `table` with keys from `from` (inclusive) to `to` (exclusive), an
    /// open end when `None`; at most `limit` of them, in key order.
    async fn read_keys(
        &self,
        table: &str,
        from: Option<&str>,
        to: Option<&str>,
        fetch: Fetch<'_>,
        limit: Option<usize>,
    ) -> Result<Vec<(String, Value)>> {
        let range = format!(
            "{table}:{}..{}",
            from.map(quoted).unwrap_or_default(),
            to.map(quoted).unwrap_or_default()
        );
        let limit = limit.map(|n| format!(" LIMIT {n}")).unwrap_or_default();
        let sql = match fetch {
            Fetch::Keys => format!("SELECT record::id(id) AS __id FROM {range}{limit}"),
            Fetch::Records => format!("SELECT *, record::id(id) AS __id FROM {range}{limit}"),
            Fetch::Fields(fields) => {
                format!("SELECT {fields}, record::id(id) AS __id FROM {range}{limit}")
            }
        };
        let keep_id = matches!(fetch, Fetch::Fields(_));
        let mut results = self.run(&sql, json!({})).await?;
        let rows = match results.get_mut(0).map(Value::take) {
            Some(Value::Array(rows)) => rows,
            _ => Vec::new(),
        };
        Ok(rows
            .into_iter()
            .filter_map(|mut row| {
                let map = row.as_object_mut()?;
                let id = map.remove("__id")?.as_str()?.to_string();
                if !keep_id {
                    map.remove("id");
                }
                Some((id, row))
            })
            .collect())
    }

    /// Whether the range reads without a damaged block (other errors are errors).
    async fn readable(&self, table: &str, from: Option<&str>, to: &Point) -> Result<bool> {
        match self
            .read_keys(table, from, Some(&to.key()), Fetch::Keys, None)
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if is_unreadable(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Reads `table` from end to end around its damaged stretches.
    pub(super) async fn walk(&self, table: &str, fetch: Fetch<'_>) -> Result<Walked> {
        let mut walked = Walked {
            rows: Vec::new(),
            damaged: Vec::new(),
        };
        let mut from: Option<String> = None;
        loop {
            // A page at a time from `from` (inclusive: a page after the first starts
            // with the last record of the one before).
            match self
                .read_keys(table, from.as_deref(), None, fetch, Some(PAGE))
                .await
            {
                Ok(rows) => {
                    let full = rows.len() == PAGE;
                    let skip = usize::from(
                        from.is_some() && rows.first().map(|(k, _)| k) == from.as_ref(),
                    );
                    let last = rows.last().map(|(k, _)| k.clone());
                    walked.rows.extend(rows.into_iter().skip(skip));
                    if !full {
                        return Ok(walked);
                    }
                    from = last;
                    continue;
                }
                Err(e) if is_unreadable(&e) => {}
                Err(e) => return Err(e),
            }
            // Every read from here that fails stops at the damage, and one that does not
            // ends before it: none reads more than about a page.
            // The last point up to which the table reads: halve between a point known
            // readable and one known not.
            let mut good = from
                .as_deref()
                .map(Point::at_or_below)
                .unwrap_or_else(Point::lowest);
            let mut bad = Point::highest();
            loop {
                let mid = good.halfway_to(&bad);
                if mid == good {
                    break;
                }
                if self.readable(table, from.as_deref(), &mid).await? {
                    good = mid;
                } else {
                    bad = mid;
                }
            }
            let start = from.as_deref().map(Point::at_or_below);
            let before = if start.is_some_and(|s| good <= s) {
                Vec::new()
            } else {
                self.read_keys(table, from.as_deref(), Some(&good.key()), fetch, None)
                    .await?
            };
            let after = before
                .last()
                .map(|(k, _)| k.clone())
                .or_else(|| walked.rows.last().map(|(k, _)| k.clone()));
            let skip =
                usize::from(from.is_some() && before.first().map(|(k, _)| k) == from.as_ref());
            walked.rows.extend(before.into_iter().skip(skip));
            // The first point past the damage: a one-point read there succeeds.
            let Some(resume) = self.past_damage(table, &bad).await? else {
                walked.damaged.push(Damaged {
                    after,
                    before: None,
                });
                return Ok(walked);
            };
            let first_after = self
                .read_keys(table, Some(&resume.key()), None, Fetch::Keys, Some(1))
                .await
                .ok()
                .and_then(|rows| rows.first().map(|(k, _)| k.clone()));
            walked.damaged.push(Damaged {
                after,
                before: first_after,
            });
            from = Some(resume.key());
        }
    }

    /// The lowest point above `bad` from which a read does not touch the damage at `bad`:
    /// doubling steps find a readable point, then halving finds the lowest.
    async fn past_damage(&self, table: &str, bad: &Point) -> Result<Option<Point>> {
        let readable_at = |p: Point| async move {
            let next = p.plus(&Point::one());
            self.readable(table, Some(&p.key()), &next).await
        };
        let mut below = bad.clone();
        let mut step = Point::one();
        let mut above = loop {
            let p = bad.plus(&step);
            if readable_at(p.clone()).await? {
                break p;
            }
            if p == Point::highest() {
                return Ok(None);
            }
            below = p;
            step = step.plus(&step);
        };
        loop {
            let mid = below.halfway_to(&above);
            if mid == below {
                return Ok(Some(above));
            }
            if readable_at(mid.clone()).await? {
                above = mid;
            } else {
                below = mid;
            }
        }
    }
}
