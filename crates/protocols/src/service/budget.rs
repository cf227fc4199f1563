//! Query budgets: an optional per-client limit on the OPRF evaluations a
//! server performs, against dictionary attacks on the unbalanced
//! protocols.
//!
//! In the filter and HE protocols the OPRF is what keeps the server's set
//! private: a client learns whether an item is in the set only by having
//! the server evaluate it. A client that may ask for any number of
//! evaluations can test a whole dictionary (every phone number of a
//! country, for instance). Contact-discovery services therefore bound the
//! evaluations per client and time window; so can `psikit serve`
//! (`--query-budget`). Clients are told apart by IP address (behind a
//! proxy or NAT several clients share one budget).
//!
//! Each client has a token bucket of `items` evaluations that refills
//! continuously over `window`: a burst of the whole budget is allowed, and
//! over any long period a client gets `items` per `window`. A request that
//! would overdraw its bucket is refused whole, with the time until it
//! would fit.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::{Error, Violation};

/// At most `items` OPRF evaluations per client per `window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryBudget {
    pub items: u64,
    pub window: Duration,
}

/// Clients tracked before full buckets are forgotten (a full bucket is
/// what a new client starts with, so forgetting it changes nothing).
const PRUNE_AT: usize = 1 << 16;

/// Every client's bucket under one budget.
pub(crate) struct Budgets {
    budget: QueryBudget,
    clients: Mutex<HashMap<IpAddr, Bucket>>,
}

#[derive(Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Budgets {
    pub(crate) fn new(budget: QueryBudget) -> Self {
        Self {
            budget,
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// Takes `items` evaluations from `client`'s bucket at time `now`, or
    /// refuses the request whole.
    pub(crate) fn charge(&self, client: IpAddr, items: u64, now: Instant) -> Result<(), Error> {
        if items == 0 {
            return Ok(());
        }
        let QueryBudget { items: cap, window } = self.budget;
        let (cap, rate) = (cap as f64, cap as f64 / window.as_secs_f64().max(1e-9));
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if clients.len() >= PRUNE_AT {
            clients.retain(|_, b| refill(b, now, cap, rate) < cap);
        }
        let bucket = clients.entry(client).or_insert(Bucket {
            tokens: cap,
            at: now,
        });
        let tokens = refill(bucket, now, cap, rate);
        let wanted = items as f64;
        if wanted > tokens {
            let wait = if wanted > cap {
                "never: the request is larger than the whole budget".to_string()
            } else {
                format!("in {:.0} s", ((wanted - tokens) / rate).ceil())
            };
            return Err(Violation::Budget(format!(
                "query budget exceeded: this server evaluates at most {} items per client every {} s; this request of {items} would fit {wait}",
                self.budget.items,
                window.as_secs()
            ))
            .into());
        }
        *bucket = Bucket {
            tokens: tokens - wanted,
            at: now,
        };
        Ok(())
    }
}

/// The bucket's tokens at `now` (not stored).
fn refill(b: &Bucket, now: Instant, cap: f64, rate: f64) -> f64 {
    let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
    (b.tokens + elapsed * rate).min(cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_gets_its_budget_per_window_and_others_are_unaffected() {
        let budgets = Budgets::new(QueryBudget {
            items: 100,
            window: Duration::from_secs(100),
        });
        let (a, b): (IpAddr, IpAddr) = ([10, 0, 0, 1].into(), [10, 0, 0, 2].into());
        let t0 = Instant::now();
        budgets.charge(a, 60, t0).expect("within budget");
        budgets.charge(a, 40, t0).expect("the rest of it");
        let err = budgets.charge(a, 1, t0).expect_err("overdrawn");
        assert!(err.to_string().contains("query budget exceeded"), "{err}");
        // Another client has its own bucket.
        budgets.charge(b, 100, t0).expect("b's own budget");
        // One item per second refills: after 30 s, 30 fit and 31 do not.
        let later = t0 + Duration::from_secs(30);
        assert!(budgets.charge(a, 31, later).is_err());
        budgets.charge(a, 30, later).expect("refilled");
        // A request above the whole budget never fits.
        let err = budgets
            .charge(b, 101, t0 + Duration::from_secs(1000))
            .expect_err("too large");
        assert!(err.to_string().contains("never"), "{err}");
    }
}
