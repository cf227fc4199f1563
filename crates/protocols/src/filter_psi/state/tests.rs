use super::*;

fn random_tags(n: usize) -> Vec<Tag> {
    (0..n)
        .map(|_| {
            let mut t = [0u8; 16];
            rand::rngs::OsRng.fill_bytes(&mut t);
            t
        })
        .collect()
}

fn key() -> ServerKey {
    ServerKey::generate(&mut rand::rngs::OsRng)
}

fn same_key(state: &ServerState) -> ServerKey {
    ServerKey::from_bytes(&state.key().to_bytes()).unwrap()
}

#[test]
fn a_state_is_never_paired_with_another_key() {
    let dir = tempfile::tempdir().unwrap();
    let (first, _) = ServerState::build(key(), random_tags(20), FilterConfig::default()).unwrap();
    first.save(dir.path()).unwrap();
    // A new state saved beside the old key is refused, the old state
    // left as it was.
    let (second, _) = ServerState::build(key(), random_tags(30), FilterConfig::default()).unwrap();
    let err = second.save(dir.path()).unwrap_err();
    assert!(
        err.to_string().contains("another database or filter state"),
        "{err}"
    );
    assert_eq!(ServerState::load(dir.path()).unwrap().len(), 20);
    // A key file swapped under a saved state is caught on load.
    let key_path = dir.path().join(KEY_FILE);
    fs::remove_file(&key_path).unwrap();
    keyfile::write_secret(&key_path, &key().to_bytes()).unwrap();
    let err = ServerState::load(dir.path()).err().expect("refused");
    assert!(err.to_string().contains("another OPRF key"), "{err}");
}

#[test]
fn any_flipped_byte_of_a_saved_state_is_refused() {
    let (state, _) = ServerState::build(key(), random_tags(300), FilterConfig::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    state.save(dir.path()).unwrap();
    let path = state_path(dir.path());
    let good = fs::read(&path).unwrap();
    // Every byte of the tail (the filter and the digest) and a spread
    // of the rest.
    let positions = (good.len() - 64..good.len()).chain((0..good.len()).step_by(97));
    for at in positions {
        let mut bad = good.clone();
        bad[at] ^= 0x10;
        fs::write(&path, &bad).unwrap();
        let err = ServerState::load(dir.path())
            .err()
            .expect("damage detected");
        assert!(err.to_string().contains("filter.state"), "{err}");
    }
    fs::write(&path, &good[..good.len() - 1]).unwrap();
    assert!(ServerState::load(dir.path()).is_err());
    fs::write(&path, &good).unwrap();
    assert_eq!(ServerState::load(dir.path()).unwrap().len(), 300);
}

#[test]
fn states_of_older_formats_still_load() {
    let (state, _) = ServerState::build(key(), random_tags(50), FilterConfig::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    state.save(dir.path()).unwrap();
    let path = state_path(dir.path());
    let current = fs::read(&path).unwrap();
    // Format 3 lacks the key's digest; formats 1 and 2 also the key
    // format (here empty: a zero length after the version); format 1
    // also the digest.
    let mut body = current[..current.len() - 32].to_vec();
    let after = STATE_MAGIC.len() + 1;
    body.drain(after..after + 32);
    body[STATE_MAGIC.len()] = UNBOUND_VERSION;
    let v3 = [&body[..], &Sha256::digest(&body)[..]].concat();
    let length: Vec<u8> = body.drain(after..after + 4).collect();
    assert_eq!(length, [0; 4]);
    body[STATE_MAGIC.len()] = UNFORMATTED_VERSION;
    let v2 = [&body[..], &Sha256::digest(&body)[..]].concat();
    body[STATE_MAGIC.len()] = UNDIGESTED_VERSION;
    for old in [v3, v2, body] {
        fs::write(&path, &old).unwrap();
        let loaded = ServerState::load(dir.path()).unwrap();
        assert_eq!((loaded.len(), loaded.key_format()), (50, ""));
    }
}

#[test]
fn the_key_format_is_saved_with_the_state() {
    let (mut state, _) =
        ServerState::build(key(), random_tags(10), FilterConfig::default()).unwrap();
    state.set_key_format("psikit-key-v1;columns=2;normalize=trim".into());
    let back = ServerState::decode(same_key(&state), &state.encode()).unwrap();
    assert_eq!(back.key_format(), "psikit-key-v1;columns=2;normalize=trim");
}

#[test]
fn a_history_slot_outside_the_filter_is_refused() {
    // Found by the filter_files fuzzer: such a state loaded, and the
    // next sync reaching back to that epoch panicked in export_slots.
    let (mut state, _) =
        ServerState::build(key(), random_tags(50), FilterConfig::default()).unwrap();
    // An insertion into so small a filter may fail and rebuild it, which
    // clears the history: add until an epoch is recorded.
    while state.history.is_empty() {
        state.update(random_tags(1), vec![]).unwrap();
    }
    let slots = state.filter().capacity_slots();
    state.history[0].1.push(slots);
    let err = ServerState::decode(same_key(&state), &state.encode()).err();
    assert!(
        matches!(&err, Some(Error::StateFile(why)) if why.contains("outside the filter")),
        "{err:?}"
    );
}

#[test]
fn build_dedups_and_contains_everything() {
    let mut tags = random_tags(5000);
    let repeated = tags[..100].to_vec();
    tags.extend(repeated);
    let (state, dups) = ServerState::build(key(), tags.clone(), FilterConfig::default()).unwrap();
    assert_eq!(dups, 100);
    assert_eq!(state.len(), 5000);
    assert!(tags.iter().all(|t| state.filter().contains(t)));
}

#[test]
fn update_tracks_history_and_replays_as_delta() {
    let tags = random_tags(20_000);
    let (mut state, _) = ServerState::build(key(), tags.clone(), FilterConfig::default()).unwrap();
    let v0 = state.version();
    let client_copy = state.filter().to_bytes();

    let add = random_tags(100);
    let remove = tags[..100].to_vec();
    let mut bogus = random_tags(5);
    bogus.extend_from_slice(&remove);
    let report = state.update(add.clone(), bogus).unwrap();
    assert_eq!(
        (report.added, report.removed, report.not_found),
        (100, 100, 5)
    );
    assert!(!report.rebuilt);
    assert_eq!(state.version().epoch, 1);
    assert!(add.iter().all(|t| state.filter().contains(t)));
    assert!(tags[100..].iter().all(|t| state.filter().contains(t)));

    // Re-adding present items is reported, not duplicated.
    let report = state.update(add[..10].to_vec(), vec![]).unwrap();
    assert_eq!((report.added, report.already_present), (0, 10));

    let changed = state.changed_since(v0).unwrap();
    assert!(
        !changed.is_empty() && changed.len() < 400,
        "{}",
        changed.len()
    );
    let mut client = CuckooFilter::from_bytes(&client_copy, usize::MAX).unwrap();
    let packed = state.filter().export_slots(&changed);
    client.import_slots(&changed, &packed).unwrap();
    assert_eq!(client.to_bytes(), state.filter().to_bytes());
    assert_eq!(state.changed_since(state.version()), Some(vec![]));
}

#[test]
fn growth_past_rebuild_load_rebuilds_with_new_id() {
    let (mut state, _) =
        ServerState::build(key(), random_tags(10_000), FilterConfig::default()).unwrap();
    let v0 = state.version();
    let report = state.update(random_tags(2_000), vec![]).unwrap();
    assert!(report.rebuilt);
    assert_ne!(state.version().filter_id, v0.filter_id);
    assert!(state.filter().load_factor() <= state.config().build_load + 0.01);
    assert_eq!(state.changed_since(v0), None);
    assert_eq!(state.len(), 12_000);
}

#[test]
fn history_is_bounded() {
    let config = FilterConfig {
        history_epochs: 3,
        ..FilterConfig::default()
    };
    let (mut state, _) = ServerState::build(key(), random_tags(1000), config).unwrap();
    let v0 = state.version();
    for _ in 0..5 {
        state.update(vec![], random_tags(1)).unwrap();
    }
    assert_eq!(state.changed_since(v0), None);
    let recent = FilterVersion {
        epoch: 2,
        ..state.version()
    };
    assert!(state.changed_since(recent).is_some());
}

#[test]
fn save_load_round_trip_and_corruption_detected() {
    let dir = tempfile::tempdir().unwrap();
    let (mut state, _) =
        ServerState::build(key(), random_tags(3000), FilterConfig::default()).unwrap();
    state.update(random_tags(10), vec![]).unwrap();
    state.save(dir.path()).unwrap();
    let loaded = ServerState::load(dir.path()).unwrap();
    assert_eq!(loaded.version(), state.version());
    assert_eq!(loaded.filter().to_bytes(), state.filter().to_bytes());
    assert_eq!(loaded.key().to_bytes(), state.key().to_bytes());
    assert_eq!(
        loaded.changed_since(FilterVersion {
            epoch: 0,
            ..state.version()
        }),
        state.changed_since(FilterVersion {
            epoch: 0,
            ..state.version()
        })
    );

    let path = state_path(dir.path());
    let bytes = fs::read(&path).unwrap();
    fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
    assert!(matches!(
        ServerState::load(dir.path()),
        Err(Error::StateFile(_))
    ));
    fs::write(&path, b"garbage").unwrap();
    assert!(matches!(
        ServerState::load(dir.path()),
        Err(Error::StateFile(_))
    ));
}

#[test]
fn the_linear_merges_match_set_operations() {
    use std::collections::BTreeSet;
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(5);
    for _ in 0..50 {
        let mut draw = |n: usize| -> BTreeSet<Tag> {
            (0..n)
                .map(|_| [rand::Rng::gen_range(&mut rng, 0..40u8); 16])
                .collect()
        };
        let (a, b) = (draw(30), draw(10));
        let (av, bv): (Vec<Tag>, Vec<Tag>) =
            (a.iter().copied().collect(), b.iter().copied().collect());
        let diff: Vec<Tag> = a.difference(&b).copied().collect();
        assert_eq!(super::sorted_difference(&av, &bv), diff);
        let rest: Vec<Tag> = b.difference(&a).copied().collect();
        let union: Vec<Tag> = a.union(&b).copied().collect();
        assert_eq!(super::sorted_union(&av, &rest), union);
    }
}
