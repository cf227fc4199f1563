use super::*;
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::collections::HashSet;

fn random_items(n: usize, rng: &mut StdRng) -> Vec<[u8; 16]> {
    (0..n).map(|_| rng.gen()).collect()
}

/// Every placed entry sits in one of its own locations, and placed
/// entries plus leftovers are exactly the inputs with their indices.
fn assert_consistent(table: &CuckooTable, items: &[[u8; 16]], leftovers: &[TableEntry]) {
    let mut seen = HashSet::new();
    for (bin, entry) in table.bins().iter().enumerate() {
        let Some(entry) = entry else { continue };
        let locations = table.locations(&entry.item);
        assert!(
            locations.contains(&(bin as u32)),
            "entry {} misplaced",
            entry.index
        );
        assert_eq!(table.find(&entry.item), Some(bin as u32));
        assert!(seen.insert(entry.index));
    }
    assert_eq!(seen.len(), table.len());
    for entry in leftovers {
        assert!(
            seen.insert(entry.index),
            "leftover {} also placed",
            entry.index
        );
        assert_eq!(table.find(&entry.item), None);
    }
    assert_eq!(seen.len(), items.len());
    for (index, item) in items.iter().enumerate() {
        let placed = table.bins().iter().flatten().find(|e| e.index == index);
        let left = leftovers.iter().find(|e| e.index == index);
        assert_eq!(placed.or(left).map(|e| e.item), Some(*item));
    }
}

/// The most items placeable at once (Kuhn's augmenting paths), the
/// reference for [`Placement::Complete`].
fn max_matching(table: &CuckooTable, items: &[[u8; 16]]) -> usize {
    fn try_place(
        i: usize,
        adj: &[Locations],
        owner: &mut [Option<usize>],
        seen: &mut [bool],
    ) -> bool {
        for &b in adj[i].iter() {
            if !seen[b as usize] {
                seen[b as usize] = true;
                if owner[b as usize].is_none_or(|o| try_place(o, adj, owner, seen)) {
                    owner[b as usize] = Some(i);
                    return true;
                }
            }
        }
        false
    }
    let adj: Vec<Locations> = items.iter().map(|x| table.locations(x)).collect();
    let mut owner = vec![None; table.table_size() as usize];
    (0..items.len())
        .filter(|&i| {
            let mut seen = vec![false; owner.len()];
            try_place(i, &adj, &mut owner, &mut seen)
        })
        .count()
}

#[test]
fn complete_placement_places_whatever_a_matching_can() {
    let mut rng = StdRng::seed_from_u64(17);
    for (n, m) in [(4, 4), (30, 32), (90, 97), (500, 520)] {
        for _ in 0..20 {
            let items = random_items(n, &mut rng);
            // No evictions: every hard case goes to the search.
            let mut table = CuckooTable::with_placement(m, 3, Placement::Complete)
                .expect("table")
                .with_max_evictions(0);
            let leftovers = table.insert_all(&items, &mut rng);
            assert_consistent(&table, &items, &leftovers);
            if max_matching(&table, &items) == n {
                assert!(leftovers.is_empty(), "n {n} m {m}");
            } else {
                assert!(!leftovers.is_empty(), "n {n} m {m}");
            }
        }
    }
}

#[test]
fn distinct_locations_are_distinct_and_in_range() {
    let mut rng = StdRng::seed_from_u64(23);
    for size in [3u32, 4, 7, 1000] {
        for item in random_items(200, &mut rng) {
            let l = distinct_locations(&item, 3, size);
            assert_eq!(l.len(), 3);
            assert!(l.iter().all(|&b| b < size));
            assert!(l[0] != l[1] && l[1] != l[2] && l[0] != l[2]);
            // The first location is hash function 0's, as everywhere.
            assert_eq!(l[0], cuckoo_location(&item, 0, size));
        }
    }
    assert!(CuckooTable::with_placement(2, 3, Placement::Complete).is_err());
}

#[test]
fn half_load_with_three_hashes_places_everything() {
    let mut rng = StdRng::seed_from_u64(11);
    for _ in 0..5 {
        let items = random_items(1 << 11, &mut rng);
        let mut table = CuckooTable::new(1 << 12, 3).unwrap();
        let leftovers = table.insert_all(&items, &mut rng);
        assert!(leftovers.is_empty());
        assert_eq!(table.load_factor(), 0.5);
        assert_consistent(&table, &items, &leftovers);
    }
}

#[test]
fn near_threshold_leftovers_keep_the_table_consistent() {
    let mut rng = StdRng::seed_from_u64(12);
    let items = random_items(1000, &mut rng);
    let mut table = CuckooTable::new(1000, 3).unwrap().with_max_evictions(50);
    let leftovers = table.insert_all(&items, &mut rng);
    assert!(!leftovers.is_empty());
    assert!(table.load_factor() > 0.85, "{}", table.load_factor());
    assert_consistent(&table, &items, &leftovers);
}

#[test]
fn far_overfull_table_fills_to_its_threshold_then_gives_up() {
    let mut rng = StdRng::seed_from_u64(15);
    let items = random_items(4000, &mut rng);
    let mut table = CuckooTable::new(1000, 3).unwrap();
    let leftovers = table.insert_all(&items, &mut rng);
    assert!(table.load_factor() > 0.85, "{}", table.load_factor());
    assert_eq!(leftovers.len(), items.len() - table.len());
    assert_consistent(&table, &items, &leftovers);
    // The last items were never tried: they come back as themselves.
    let last = leftovers.last().unwrap();
    assert_eq!((last.index, last.item), (3999, items[3999]));
}

#[test]
fn overfull_table_returns_the_surplus() {
    let mut rng = StdRng::seed_from_u64(13);
    let items = random_items(10, &mut rng);
    let mut table = CuckooTable::new(4, 2).unwrap();
    let leftovers = table.insert_all(&items, &mut rng);
    assert!(table.len() <= 4);
    assert_eq!(leftovers.len(), 10 - table.len());
    assert_consistent(&table, &items, &leftovers);
}

#[test]
fn one_hash_function_turns_collisions_into_leftovers() {
    let mut rng = StdRng::seed_from_u64(14);
    let items = random_items(300, &mut rng);
    let mut table = CuckooTable::new(256, 1).unwrap();
    let leftovers = table.insert_all(&items, &mut rng);
    let bins: HashSet<u32> = items.iter().map(|x| cuckoo_location(x, 0, 256)).collect();
    assert_eq!(table.len(), bins.len());
    assert_eq!(leftovers.len(), items.len() - bins.len());
    assert_consistent(&table, &items, &leftovers);
    // Without evictions the first item of each bin keeps it.
    for entry in &leftovers {
        let bin = cuckoo_location(&entry.item, 0, 256) as usize;
        let occupant = table.bins()[bin].as_ref().map(|e| e.index);
        assert!(occupant < Some(entry.index));
    }
}

#[test]
fn locations_are_deduplicated_and_match_single_locations() {
    let mut rng = StdRng::seed_from_u64(15);
    let mut saw_duplicate = false;
    for item in random_items(200, &mut rng) {
        let locations = cuckoo_locations(&item, 8, 5);
        let all: Vec<u32> = (0..8).map(|i| cuckoo_location(&item, i, 5)).collect();
        let mut expected = all.clone();
        let mut seen = HashSet::new();
        expected.retain(|b| seen.insert(*b));
        assert_eq!(locations.as_slice(), expected);
        saw_duplicate |= expected.len() < all.len();
        assert!(locations.iter().all(|&b| b < 5));
    }
    assert!(saw_duplicate);
    let item = [5u8; 16];
    let by_value: Vec<u32> = cuckoo_locations(&item, 3, 100).into_iter().collect();
    let by_ref: Vec<u32> = (&cuckoo_locations(&item, 3, 100))
        .into_iter()
        .copied()
        .collect();
    assert_eq!(by_value, by_ref);
    assert_eq!(cuckoo_locations(&[0; 16], 9, 1 << 20).len(), 8);
    assert!(cuckoo_locations(&[0; 16], 0, 10).is_empty());
}

#[test]
fn hash_functions_differ_and_spread_evenly() {
    let mut rng = StdRng::seed_from_u64(16);
    let items = random_items(40_000, &mut rng);
    let mut counts = [0u32; 8];
    let mut same = 0;
    for item in &items {
        counts[cuckoo_location(item, 0, 8) as usize] += 1;
        same += u32::from(cuckoo_location(item, 0, 1 << 30) == cuckoo_location(item, 1, 1 << 30));
    }
    assert_eq!(same, 0);
    assert!(
        counts.iter().all(|&c| (4_600..5_400).contains(&c)),
        "{counts:?}"
    );
    assert_eq!(cuckoo_location(&[3; 16], 2, 1), 0);
    assert_eq!(cuckoo_location(&[3; 16], 2, 0), 0);
}

#[test]
fn new_rejects_bad_shapes() {
    assert_eq!(
        CuckooTable::new(0, 3).unwrap_err(),
        CuckooTableError::ZeroSize
    );
    assert_eq!(
        CuckooTable::new(8, 0).unwrap_err(),
        CuckooTableError::HashCount(0)
    );
    assert_eq!(
        CuckooTable::new(8, 9).unwrap_err(),
        CuckooTableError::HashCount(9)
    );
    let table = CuckooTable::new(8, 8).unwrap();
    assert!(table.is_empty());
    assert_eq!((table.table_size(), table.hash_count()), (8, 8));
}
