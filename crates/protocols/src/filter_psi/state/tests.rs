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
    let (mut first, _) =
        ServerState::build(key(), random_tags(20), FilterConfig::default()).unwrap();
    first.save(dir.path()).unwrap();
    // A new state saved beside the old key is refused, the old state
    // left as it was.
    let (mut second, _) =
        ServerState::build(key(), random_tags(30), FilterConfig::default()).unwrap();
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
    let (mut state, _) =
        ServerState::build(key(), random_tags(300), FilterConfig::default()).unwrap();
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
    let (mut state, _) =
        ServerState::build(key(), random_tags(50), FilterConfig::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    state.save(dir.path()).unwrap();
    let path = state_path(dir.path());
    let current = fs::read(&path).unwrap();
    // Format 3 lacks the key's digest; formats 1 and 2 also the key
    // format (here empty: a zero length after the version); format 1
    // also the digest.
    let mut body = current[..current.len() - 32].to_vec();
    body[STATE_MAGIC.len()] = UNLOGGED_VERSION;
    let v4 = [&body[..], &Sha256::digest(&body)[..]].concat();
    let after = STATE_MAGIC.len() + 1;
    body.drain(after..after + 32);
    body[STATE_MAGIC.len()] = UNBOUND_VERSION;
    let v3 = [&body[..], &Sha256::digest(&body)[..]].concat();
    let length: Vec<u8> = body.drain(after..after + 4).collect();
    assert_eq!(length, [0; 4]);
    body[STATE_MAGIC.len()] = UNFORMATTED_VERSION;
    let v2 = [&body[..], &Sha256::digest(&body)[..]].concat();
    body[STATE_MAGIC.len()] = UNDIGESTED_VERSION;
    for old in [v4, v3, v2, body] {
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
        assert_eq!(super::sorted::sorted_difference(&av, &bv), diff);
        let rest: Vec<Tag> = b.difference(&a).copied().collect();
        let common: Vec<Tag> = a.intersection(&b).copied().collect();
        let replaced: BTreeSet<Tag> = diff.iter().chain(&rest).copied().collect();
        let mut set = av.clone();
        assert!(super::sorted::fits(&av, &common, &rest));
        super::sorted::replace_fitting(&mut set, &common, &rest);
        assert_eq!(set, replaced.into_iter().collect::<Vec<_>>());
        assert_eq!(
            rest.is_empty(),
            super::sorted::fits(&av, &rest, &[]),
            "removes absent"
        );
        assert_eq!(
            common.is_empty(),
            super::sorted::fits(&av, &[], &common),
            "adds present"
        );
    }
}

/// What a loaded state must agree on with the one that was saved.
fn same_state(a: &ServerState, b: &ServerState) -> bool {
    a.version() == b.version()
        && a.tags == b.tags
        && a.history == b.history
        && a.key_format() == b.key_format()
        && a.filter().to_bytes() == b.filter().to_bytes()
}

fn change_file(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{STATE_FILE}.{n}"))
}

#[test]
fn an_update_saves_only_its_change_and_loads_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (mut state, _) =
        ServerState::build(key(), random_tags(4000), FilterConfig::default()).unwrap();
    state.set_key_format("psikit-key-v1;columns=1".into());
    state.save(dir.path()).unwrap();
    let base = fs::read(state_path(dir.path())).unwrap();
    for epoch in 1..=3 {
        let gone = state.tags[..20].to_vec();
        let report = state.update(random_tags(20), gone).unwrap();
        assert!(!report.rebuilt && report.removed == 20 && report.added == 20);
        state.save(dir.path()).unwrap();
        assert!(change_file(dir.path(), epoch).exists());
        let loaded = ServerState::load(dir.path()).unwrap();
        assert!(same_state(&loaded, &state), "epoch {epoch}");
    }
    assert!(
        fs::read(state_path(dir.path())).unwrap() == base,
        "the base is not rewritten"
    );
    // A state loaded with its changes goes on appending after them.
    let mut loaded = ServerState::load(dir.path()).unwrap();
    loaded.update(random_tags(5), vec![]).unwrap();
    loaded.save(dir.path()).unwrap();
    assert!(change_file(dir.path(), 4).exists());
    assert!(same_state(&ServerState::load(dir.path()).unwrap(), &loaded));
    // A new key format is no change: the base is written whole and the
    // change files go.
    loaded.set_key_format("psikit-key-v1;columns=2".into());
    loaded.save(dir.path()).unwrap();
    assert!(!change_file(dir.path(), 1).exists());
    assert!(same_state(&ServerState::load(dir.path()).unwrap(), &loaded));
}

#[test]
fn changes_past_a_quarter_of_the_base_write_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let (mut state, _) =
        ServerState::build(key(), random_tags(1000), FilterConfig::default()).unwrap();
    state.save(dir.path()).unwrap();
    let mut rewritten = false;
    for _ in 0..40 {
        let gone = state.tags[..30].to_vec();
        state.update(random_tags(30), gone).unwrap();
        state.save(dir.path()).unwrap();
        rewritten |= !change_file(dir.path(), 1).exists();
        assert!(same_state(&ServerState::load(dir.path()).unwrap(), &state));
    }
    assert!(rewritten, "the changes never passed a quarter of the base");
}

#[test]
fn a_damaged_or_misplaced_change_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (mut state, _) =
        ServerState::build(key(), random_tags(2000), FilterConfig::default()).unwrap();
    state.save(dir.path()).unwrap();
    state.update(random_tags(10), vec![]).unwrap();
    state.save(dir.path()).unwrap();
    let path = change_file(dir.path(), 1);
    let good = fs::read(&path).unwrap();
    let mut bad = good.clone();
    let at = bad.len() / 2;
    bad[at] ^= 1;
    fs::write(&path, &bad).unwrap();
    let err = ServerState::load(dir.path()).err().expect("refused");
    assert!(err.to_string().contains("filter.state.1"), "{err}");
    // Changes that do not follow the state are refused before it changes.
    fs::write(&path, &good).unwrap();
    let mut at = ServerState::load(dir.path()).unwrap();
    let next = |s: &mut ServerState, removed: &[Tag]| {
        s.version.epoch += 1;
        let change = s.encode_change(removed, &[], &[]);
        s.version.epoch -= 1;
        change
    };
    let absent = next(&mut at, &random_tags(1));
    assert!(at.apply_change(&absent).is_err(), "removes a tag it lacks");
    let present = at.tags[..1].to_vec();
    let added = at.encode_change(&[], &present, &[]);
    assert!(
        at.apply_change(&added).is_err(),
        "of this epoch, not the next"
    );
    let fine = next(&mut at, &present);
    at.apply_change(&fine).unwrap();
    assert_eq!((at.version().epoch, at.len()), (2, 2009));
}

#[cfg(feature = "net")]
#[test]
fn a_running_service_picks_up_an_appended_change() {
    use crate::service::{ServerLimits, Service};
    let dir = tempfile::tempdir().unwrap();
    let (mut state, _) =
        ServerState::build(key(), random_tags(2000), FilterConfig::default()).unwrap();
    state.save(dir.path()).unwrap();
    let service = super::super::FilterService::open(dir.path(), ServerLimits::default()).unwrap();
    assert!(service.reload().unwrap().is_none(), "nothing changed yet");
    state.update(random_tags(10), vec![]).unwrap();
    state.save(dir.path()).unwrap();
    assert!(change_file(dir.path(), 1).exists());
    assert!(service.reload().unwrap().is_some(), "the change is seen");
    assert!(same_state(&service.snapshot().state, &state));
    // Later changes are read on top of the served state; a base written
    // again (changes past a quarter of it) is read whole.
    let mut rewritten = false;
    while !rewritten {
        let gone = state.tags[..100].to_vec();
        state.update(random_tags(100), gone).unwrap();
        state.save(dir.path()).unwrap();
        rewritten = !change_file(dir.path(), 1).exists();
        assert!(service.reload().unwrap().is_some());
        assert!(same_state(&service.snapshot().state, &state));
    }
}

#[test]
fn an_item_removed_and_added_in_one_update_stays() {
    let dir = tempfile::tempdir().unwrap();
    let (mut state, _) =
        ServerState::build(key(), random_tags(2000), FilterConfig::default()).unwrap();
    state.save(dir.path()).unwrap();
    let both = state.tags[..3].to_vec();
    let mut add = random_tags(4);
    add.extend_from_slice(&both);
    let report = state.update(add, both.clone()).unwrap();
    assert_eq!(
        (report.removed, report.added, report.already_present),
        (3, 7, 0)
    );
    assert_eq!(state.len(), 2004);
    assert!(both.iter().all(|t| state.filter().contains(t)));
    state.save(dir.path()).unwrap();
    assert!(change_file(dir.path(), 1).exists());
    assert!(same_state(&ServerState::load(dir.path()).unwrap(), &state));
}
