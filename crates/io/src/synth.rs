//! Deterministic synthetic CSV data for demos, tests and benchmarks.
//!
//! Rows come from an unbounded, seeded "universe": row `id` of seed `s` is
//! always the same `id,email,name` triple, and distinct ids always have
//! distinct emails (the id is embedded in the email's local part, and names
//! contain no digits), even after any [`Normalize`](crate::Normalize) options.
//! Two files therefore share exactly the ids they have in common, which is
//! how [`overlap_plan`] builds a server/client pair with a known
//! intersection.
//!
//! About one row in sixteen uses the names' non-ASCII spelling in the email
//! too, and several names are non-ASCII, so Unicode paths get exercised.
//! The generator is a splitmix64 PRNG: fast and reproducible, not secure.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::fs::File;
use std::io;
use std::ops::Range;
use std::path::Path;

use crate::error::{Error, Result};

/// Output buffer size: generated files are written sequentially and large.
const WRITE_BUFFER: usize = 256 * 1024;

/// First names as (display, ASCII email form).
const FIRST: &[(&str, &str)] = &[
    ("Alice", "alice"),
    ("Bob", "bob"),
    ("Carol", "carol"),
    ("David", "david"),
    ("Émile", "emile"),
    ("Fatima", "fatima"),
    ("Grace", "grace"),
    ("Hiro", "hiro"),
    ("Inès", "ines"),
    ("James", "james"),
    ("Zoë", "zoe"),
    ("Łukasz", "lukasz"),
    ("Mia", "mia"),
    ("Noah", "noah"),
    ("Olivia", "olivia"),
    ("José", "jose"),
    ("Priya", "priya"),
    ("Søren", "soren"),
    ("Björn", "bjorn"),
    ("Ярослав", "yaroslav"),
];

/// Last names as (display, ASCII email form).
const LAST: &[(&str, &str)] = &[
    ("Smith", "smith"),
    ("Müller", "mueller"),
    ("García", "garcia"),
    ("Nguyễn", "nguyen"),
    ("Rossi", "rossi"),
    ("Kowalski", "kowalski"),
    ("Dubois", "dubois"),
    ("Tanaka", "tanaka"),
    ("O'Brien", "obrien"),
    ("Jensen", "jensen"),
    ("Silva", "silva"),
    ("Öztürk", "ozturk"),
    ("Martin", "martin"),
    ("Brown", "brown"),
    ("Novák", "novak"),
    ("Wang", "wang"),
];

/// Email domains; one is an internationalised domain name.
const DOMAINS: &[&str] = &[
    "example.com",
    "example.org",
    "example.net",
    "mail.example",
    "post.example",
    "bücher.example",
];

/// One synthetic row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntheticRow {
    /// The row's id in the universe (also written as the `id` column).
    pub id: u64,
    /// A unique email address, e.g. `alice.smith42@example.com`.
    pub email: String,
    /// A display name, e.g. `Alice Smith`.
    pub name: String,
}

/// The row with universe id `id` for `seed`.
pub fn synthetic_row(seed: u64, id: u64) -> SyntheticRow {
    let mut row = SyntheticRow {
        id,
        email: String::new(),
        name: String::new(),
    };
    fill_row(seed, id, &mut row.email, &mut row.name);
    row
}

/// Writes the `id,email,name` fields of row `id` into reusable buffers.
fn fill_row(seed: u64, id: u64, email: &mut String, name: &mut String) {
    let h = splitmix64(seed ^ splitmix64(id));
    let (first, first_ascii) = FIRST[pick(h, FIRST.len())];
    let (last, last_ascii) = LAST[pick(h >> 16, LAST.len())];
    let domain = DOMAINS[pick(h >> 32, DOMAINS.len())];
    email.clear();
    name.clear();
    if (h >> 48) & 15 == 0 {
        push_lowercase(email, first);
        email.push('.');
        push_lowercase(email, last);
    } else {
        email.push_str(first_ascii);
        email.push('.');
        email.push_str(last_ascii);
    }
    // Writing to a String cannot fail.
    let _ = write!(email, "{id}@{domain}");
    name.push_str(first);
    name.push(' ');
    name.push_str(last);
}

/// Appends a lowercase version of `s` (non-ASCII letters included).
fn push_lowercase(out: &mut String, s: &str) {
    out.extend(s.chars().flat_map(char::to_lowercase));
}

/// Writes a CSV with header `id,email,name` and the rows with the given
/// ids, in the given order, to `path`. Returns the number of rows written.
pub fn write_synthetic_csv(
    path: impl AsRef<Path>,
    ids: impl IntoIterator<Item = u64>,
    seed: u64,
) -> Result<u64> {
    let path = path.as_ref();
    let file = File::create(path).map_err(|source| Error::Create {
        path: path.to_owned(),
        source,
    })?;
    write_synthetic(file, ids, seed).map_err(|source| Error::Csv {
        file: path.display().to_string(),
        source,
    })
}

/// Body of [`write_synthetic_csv`] for any writer.
fn write_synthetic(
    out: impl io::Write,
    ids: impl IntoIterator<Item = u64>,
    seed: u64,
) -> csv::Result<u64> {
    let mut csv = csv::WriterBuilder::new()
        .buffer_capacity(WRITE_BUFFER)
        .from_writer(out);
    csv.write_record(["id", "email", "name"])?;
    let (mut email, mut name, mut id_text) = (String::new(), String::new(), String::new());
    let mut count = 0;
    for id in ids {
        fill_row(seed, id, &mut email, &mut name);
        id_text.clear();
        let _ = write!(id_text, "{id}");
        csv.write_record([&id_text, &email, &name])?;
        count += 1;
    }
    csv.flush()?;
    Ok(count)
}

/// Which universe ids go into a server file and a client file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OverlapPlan {
    /// The server file's ids, in order: `0..server_rows`.
    pub server_ids: Range<u64>,
    /// The client file's ids, in (shuffled) file order.
    pub client_ids: Vec<u64>,
    /// The true intersection: client ids that are also server ids, sorted.
    pub common_ids: Vec<u64>,
}

/// Plans a server file of `server_rows` rows and a client file of
/// `client_rows` rows of which exactly `overlap` also appear in the server
/// file. The common rows are a seeded random sample of the server's rows;
/// the client's other rows use ids past the server's range; the client's
/// row order is shuffled.
pub fn overlap_plan(
    server_rows: u64,
    client_rows: u64,
    overlap: u64,
    seed: u64,
) -> Result<OverlapPlan> {
    if overlap > client_rows || overlap > server_rows {
        return Err(Error::Synthetic(format!(
            "overlap {overlap} exceeds the client ({client_rows}) or server ({server_rows}) row count"
        )));
    }
    let fresh_end = server_rows
        .checked_add(client_rows - overlap)
        .ok_or_else(|| Error::Synthetic("row counts are too large".to_owned()))?;
    let mut rng = SplitMix(seed ^ 0x5EED_0FC1_1E47);
    let mut common_ids = sample_distinct(&mut rng, server_rows, overlap);
    common_ids.sort_unstable();
    let fresh = server_rows..fresh_end;
    let mut client_ids: Vec<u64> = common_ids.iter().copied().chain(fresh).collect();
    shuffle(&mut rng, &mut client_ids);
    Ok(OverlapPlan {
        server_ids: 0..server_rows,
        client_ids,
        common_ids,
    })
}

/// Plans with [`overlap_plan`] and writes both files; the returned plan's
/// `common_ids` (or their [`synthetic_row`] emails) is the true intersection.
pub fn write_overlapping_pair(
    server_path: impl AsRef<Path>,
    client_path: impl AsRef<Path>,
    server_rows: u64,
    client_rows: u64,
    overlap: u64,
    seed: u64,
) -> Result<OverlapPlan> {
    let plan = overlap_plan(server_rows, client_rows, overlap, seed)?;
    write_synthetic_csv(server_path, plan.server_ids.clone(), seed)?;
    write_synthetic_csv(client_path, plan.client_ids.iter().copied(), seed)?;
    Ok(plan)
}

/// `k` distinct values from `0..n` (Floyd's algorithm: O(k) time and memory,
/// independent of `n`, so sampling from a huge server range stays cheap).
fn sample_distinct(rng: &mut SplitMix, n: u64, k: u64) -> Vec<u64> {
    let mut chosen = HashSet::with_capacity(k as usize);
    let mut out = Vec::with_capacity(k as usize);
    for j in n - k..n {
        let t = rng.below(j + 1);
        let value = if chosen.insert(t) { t } else { j };
        chosen.insert(value);
        out.push(value);
    }
    out
}

/// Fisher–Yates shuffle.
fn shuffle(rng: &mut SplitMix, items: &mut [u64]) {
    for i in (1..items.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        items.swap(i, j);
    }
}

/// Index into a table of `len` entries from hash bits.
fn pick(h: u64, len: usize) -> usize {
    (h & 0xFFFF) as usize % len
}

/// The splitmix64 finaliser: a bijective 64-bit mix.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A splitmix64 stream.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        splitmix64(self.0)
    }

    /// Uniform-enough value in `0..bound` (multiply-shift; bias is
    /// negligible for test data). `bound` must be non-zero.
    fn below(&mut self, bound: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(bound)) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floyd_sample_is_distinct_and_in_range() {
        let mut rng = SplitMix(7);
        let s = sample_distinct(&mut rng, 100, 100);
        let set: HashSet<u64> = s.iter().copied().collect();
        assert_eq!(set.len(), 100);
        assert!(s.iter().all(|&v| v < 100));
        let s = sample_distinct(&mut rng, u64::MAX / 2, 1000);
        assert_eq!(s.iter().copied().collect::<HashSet<_>>().len(), 1000);
    }

    #[test]
    fn rows_are_deterministic_and_unique() {
        assert_eq!(synthetic_row(1, 42), synthetic_row(1, 42));
        let differ = (0..100)
            .filter(|&i| synthetic_row(1, i).name != synthetic_row(2, i).name)
            .count();
        assert!(differ > 50, "the seed changes the content: {differ}");
        let emails: HashSet<String> = (0..50_000).map(|i| synthetic_row(3, i).email).collect();
        assert_eq!(emails.len(), 50_000);
        let non_ascii = (0..1000)
            .filter(|&i| !synthetic_row(3, i).email.is_ascii())
            .count();
        assert!(non_ascii > 20, "some emails are non-ASCII: {non_ascii}");
    }
}
